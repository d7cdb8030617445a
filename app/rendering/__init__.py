"""Chat templates rendered exactly as transformers renders them behind vLLM's chat endpoint."""

from app.rendering.content_format import ContentFormat, detect_content_format
from app.rendering.memo import RenderCache
from app.rendering.messages import prepare_messages
from app.rendering.template import ChatTemplate

__all__ = [
    "ChatTemplate",
    "ContentFormat",
    "RenderCache",
    "detect_content_format",
    "prepare_messages",
]
