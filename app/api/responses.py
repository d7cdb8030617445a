"""Placeholder router for the responses API (being built)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
