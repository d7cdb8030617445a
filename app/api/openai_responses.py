"""Placeholder router for the OpenAI Responses API (being built)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
