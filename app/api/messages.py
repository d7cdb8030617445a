"""Placeholder router for the messages API (being built)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
