"""Language-model providers: an OpenAI-compatible client, embeddings, and the embedded model."""

from engine.providers.base import ChatMessage, ChatProvider, GenerationParams

__all__ = ["ChatMessage", "ChatProvider", "GenerationParams"]
