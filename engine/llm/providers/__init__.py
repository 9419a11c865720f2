"""Language-model providers: an OpenAI-compatible client, embeddings, and the embedded model."""

from engine.llm.providers.base import ChatMessage, ChatProvider, GenerationParams

__all__ = ["ChatMessage", "ChatProvider", "GenerationParams"]
