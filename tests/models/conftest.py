"""The tiny GGUF and the story text that the measure tests share."""

import pytest

from .tiny_gguf import STORY, write


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny qwen2 GGUF under YaRN 4 and a story to read: ``(model path, text path)``."""
    d = tmp_path_factory.mktemp("tiny")
    path = d / "tiny.gguf"
    write(path, "qwen2", rope_scaling={"type": "yarn", "factor": 4.0}, gain=0.5)
    text = d / "story.txt"
    text.write_text(STORY, encoding="utf-8")
    return path, text
