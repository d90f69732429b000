"""Load a model into the process's own memory, not mapped from its weights file.

transformers loads a safetensors file by memory-mapping it (a private, copy-on-write mapping)
and keeps the mapped tensors as the model's parameters. Rewriting that file in place (``cp``
over it, a ``save_pretrained`` into the folder: both truncate and rewrite the same inode) then
changes the loaded model under the process: the kernel drops even the pages the process had
written to, so a training run's updates were lost and its parameters became the new file's
(and a file cut shorter is a SIGBUS at the next touch). A model loaded here owns its memory:
the file is read once, and nothing done to it afterwards reaches the model.

Each tensor is read straight into its own buffer (``readinto``), so loading holds the weights
once, as the mapped load did: copying the mapped tensors afterwards would hold them twice while
it runs (measured on SmolLM2-135M in fp32, 0.54 GB: a peak of 1.42 GB, against 0.91 GB read
here). A model this cannot read so (no safetensors file, a hub name, a class transformers maps
from remote code) is loaded by transformers and its tensors copied one by one
(:func:`own_tensors`).
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
GENERATION_CONFIG = "generation_config.json"
_HEADER_LIMIT = 100 * 2**20  # safetensors' own limit on a header's size


class WeightsFileError(ValueError):
    """A safetensors file that cannot be read (cut short, a broken header); one line naming it."""


class _UnknownDtype(Exception):
    """A tensor of a dtype this reader does not map (transformers' own load takes the file)."""


def _dtypes() -> dict:
    import torch

    names = {
        "F64": "float64",
        "F32": "float32",
        "F16": "float16",
        "BF16": "bfloat16",
        "I64": "int64",
        "I32": "int32",
        "I16": "int16",
        "I8": "int8",
        "U8": "uint8",
        "BOOL": "bool",
        "U16": "uint16",
        "U32": "uint32",
        "U64": "uint64",
        "F8_E4M3": "float8_e4m3fn",
        "F8_E5M2": "float8_e5m2",
    }
    return {key: getattr(torch, name) for key, name in names.items() if hasattr(torch, name)}


def safetensors_files(folder: Path) -> list[Path] | None:
    """The safetensors files of a local model folder (one file, or the shards its index names),
    None where it has none (transformers then loads what it has)."""
    if (folder / SINGLE_FILE).is_file():
        return [folder / SINGLE_FILE]
    index = folder / INDEX_FILE
    if not index.is_file():
        return None
    try:
        weight_map = json.loads(index.read_text())["weight_map"]
        return [folder / name for name in sorted(set(weight_map.values()))]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise WeightsFileError(f"{index} is not a safetensors index ({type(exc).__name__}: {exc})") from None


def read_safetensors(path: Path) -> dict:
    """Every tensor of safetensors file ``path``, each in a buffer of its own (not the file's)."""
    import torch

    dtypes = _dtypes()
    with open(path, "rb", buffering=0) as f:
        size = f.seek(0, 2)
        f.seek(0)
        head = f.read(8)
        if len(head) < 8:
            raise WeightsFileError(f"{path} is cut short ({size} bytes, no safetensors header)")
        (n,) = struct.unpack("<Q", head)
        if n > min(_HEADER_LIMIT, size - 8):
            raise WeightsFileError(f"{path} is cut short or not safetensors (a header of {n} bytes in {size})")
        try:
            header = json.loads(f.read(n))
            entries = {k: v for k, v in header.items() if k != "__metadata__"}
            spans = {k: (v["dtype"], list(v["shape"]), *map(int, v["data_offsets"])) for k, v in entries.items()}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise WeightsFileError(f"{path} has a broken safetensors header ({type(exc).__name__}: {exc})") from None
        out = {}
        for name, (dtype, shape, begin, end) in sorted(spans.items(), key=lambda kv: kv[1][2]):
            if dtype not in dtypes:
                raise _UnknownDtype(dtype)
            if not all(type(d) is int and d >= 0 for d in shape):
                raise WeightsFileError(f"{path} has a broken safetensors header (tensor {name} of shape {shape})")
            nbytes = math.prod(shape) * dtypes[dtype].itemsize
            if end - begin != nbytes or begin < 0 or 8 + n + end > size:  # checked before anything is allocated
                raise WeightsFileError(
                    f"{path} is cut short or corrupt: tensor {name} ({dtype} {shape}) at bytes {begin}..{end} "
                    f"of a data section of {size - 8 - n}"
                )
            tensor = torch.empty(shape, dtype=dtypes[dtype])
            f.seek(8 + n + begin)
            view = memoryview(tensor.reshape(-1).view(torch.uint8).numpy()) if nbytes else memoryview(b"")
            done = 0
            while done < nbytes:
                got = f.readinto(view[done:])
                if not got:
                    raise WeightsFileError(f"{path} was cut short while it was read (tensor {name})")
                done += got
            out[name] = tensor
    return out


def own_tensors(model) -> None:
    """Replace the data of every parameter and buffer of ``model`` with a copy of its own, one
    at a time. A tied weight is one parameter, met once, so it stays tied."""
    import torch

    with torch.no_grad():
        for param in model.parameters():
            param.data = param.data.clone()
        for module in model.modules():
            for name, buf in module._buffers.items():
                if buf is not None:
                    module._buffers[name] = buf.clone()


def load_causal_lm(path: str, dtype):
    """``AutoModelForCausalLM.from_pretrained(path, dtype=dtype)`` whose tensors are its own
    (module docstring). Errors are transformers' (OSError, ValueError) or a
    :class:`WeightsFileError` (a ValueError) naming the file."""
    from transformers import MODEL_FOR_CAUSAL_LM_MAPPING, AutoConfig, AutoModelForCausalLM, GenerationConfig

    folder = Path(path)
    files = safetensors_files(folder) if folder.is_dir() else None
    config = AutoConfig.from_pretrained(path) if files else None
    model_class = MODEL_FOR_CAUSAL_LM_MAPPING.get(type(config), None) if files else None
    state = {}
    try:
        for file in files if model_class is not None else ():
            state.update(read_safetensors(file))
    except _UnknownDtype:
        model_class = None
    if model_class is None:
        state.clear()
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
        own_tensors(model)
        return model
    # transformers takes a state dict only without a path; it renames, converts and ties as it
    # would from the folder, and takes the tensors as they are where their dtype is asked for
    model = model_class.from_pretrained(None, config=config, state_dict=state, dtype=dtype)
    if (folder / GENERATION_CONFIG).is_file():  # read from the folder's own file, as from a path
        model.generation_config = GenerationConfig.from_pretrained(path)
    model.config.name_or_path = model.name_or_path = path  # as from_pretrained(path) sets them
    return model
