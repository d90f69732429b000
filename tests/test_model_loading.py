"""Loading a model folder as both engines and `pasr eval` do (runtime.model_loading)."""

from __future__ import annotations

import logging


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_a_loaded_tokenizer_decodes_quietly_and_keeps_spaces(tiny_model_dir):
    """The tiny model's tokenizer is saved from SmolLM2's, which asks for WordPiece's space
    clean-up: transformers ignores it for BPE but warns at the first decode of each run. Loaded
    here, the tokenizer decodes without that warning, and a space before punctuation stays."""
    from runtime.model_loading import load_model_and_tokenizer

    _, tok, _ = load_model_and_tokenizer(str(tiny_model_dir))
    records = _Records()
    hf_logger = logging.getLogger("transformers")  # transformers' own handler sits here
    hf_logger.addHandler(records)
    logging.Logger.warning_once.cache_clear()  # transformers warns once per process
    try:
        text = "12 , 3 . and ( 4 )"
        assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text
    finally:
        hf_logger.removeHandler(records)
    assert not [m for m in records.messages if "clean_up_tokenization_spaces" in m]
