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


# --- malformed checkpoint metadata (issue 51) ---------------------------------------------------

import json  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402


def _local_run(root: Path, pointer: bytes) -> tuple[str, Path]:
    """RUN/checkpoints/latest holding ``pointer``, beside a complete step_000002."""
    ckpts = root / "run" / "checkpoints"
    (ckpts / "step_000002").mkdir(parents=True)
    (ckpts / "step_000002" / "trainer_state.json").write_text('{"step": 2}')
    (ckpts / "latest").write_bytes(pointer)
    return str(ckpts / "latest"), ckpts / "latest"


def _verl_run(root: Path, tracker: bytes | None = b"2", fsdp_config: bytes = b'{"world_size": 1}') -> tuple[str, Path]:
    """A verl run directory: global_step_2/actor with its fsdp_config.json and huggingface/ config
    (no shards: malformed metadata is refused before any are read)."""
    run = root / "verl_run"
    actor = run / "global_step_2" / "actor"
    (actor / "huggingface").mkdir(parents=True)
    (actor / "huggingface" / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (actor / "fsdp_config.json").write_bytes(fsdp_config)
    if tracker is not None:
        (run / "latest_checkpointed_iteration.txt").write_bytes(tracker)
    return str(run), (run / "latest_checkpointed_iteration.txt" if tracker != b"2" else actor / "fsdp_config.json")


MALFORMED = {
    "latest not text": lambda root: _local_run(root, b"\xff\xfestep"),
    "latest a path": lambda root: _local_run(root, b"../../elsewhere/step_000002\n"),
    "latest empty": lambda root: _local_run(root, b"  \n"),
    "tracker not a step": lambda root: _verl_run(root, tracker=b"two\n"),
    "tracker not text": lambda root: _verl_run(root, tracker=b"\xff2"),
    "fsdp_config not json": lambda root: _verl_run(root, fsdp_config=b"{not json"),
    "fsdp_config a list": lambda root: _verl_run(root, fsdp_config=b"[2]"),
    "fsdp_config world_size": lambda root: _verl_run(root, fsdp_config=b'{"world_size": "two"}'),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_checkpoint_metadata_is_one_line_naming_the_file(case, tmp_path, monkeypatch):
    """Before: a UnicodeDecodeError, JSONDecodeError, AttributeError or ValueError traceback, or
    (a tracker that is not a step number) another step evaluated without a word."""
    from runtime.model_loading import ModelNotFoundError, resolve_model_path

    monkeypatch.setenv("PASR_CACHE", str(tmp_path / "cache"))
    spec, bad_file = MALFORMED[case](tmp_path)
    with pytest.raises(ModelNotFoundError) as exc:
        resolve_model_path(spec)
    message = str(exc.value)
    assert message.startswith(str(bad_file)) and "\n" not in message, message


@pytest.mark.parametrize("case", ["latest not text", "tracker not a step", "fsdp_config not json"])
def test_pasr_eval_on_malformed_checkpoint_metadata_is_one_line(case, tmp_path, monkeypatch, run_cli):
    monkeypatch.setenv("PASR_CACHE", str(tmp_path / "cache"))
    spec, bad_file = MALFORMED[case](tmp_path)
    data = tmp_path / "one.jsonl"
    data.write_text(json.dumps({"question": "What is 1+1?", "answer": "2"}) + "\n")
    rc, _, err = run_cli(
        [
            "eval",
            "--model",
            spec,
            "--dataset",
            str(data),
            "--backend",
            "hf",
            "--max-new-tokens",
            "4",
            "--threads",
            "1",
            "--progress",
            "off",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    lines = [line for line in err.splitlines() if line.startswith("pasr eval: error:")]
    assert rc == 2 and len(lines) == 1 and str(bad_file) in lines[0] and "Traceback" not in err, err


def test_pasr_train_resume_on_a_malformed_latest_pointer_is_one_line(tmp_path):
    """Before: the UnicodeDecodeError of reading the pointer, as a traceback."""
    from data.cli_errors import CliError
    from recipe.local_engine.cli import _resume_config
    from recipe.local_engine.config import load_config
    from recipe.local_engine.run_io import write_config

    _, pointer = _local_run(tmp_path, b"\xff\xfestep")
    run = pointer.parent.parent
    write_config(run, load_config())
    with pytest.raises(CliError, match=rf"^cannot resume {run}: {pointer} is not UTF-8 text") as exc:
        _resume_config(run, [], force=False)
    assert "\n" not in str(exc.value)
