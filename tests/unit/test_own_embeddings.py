"""What `context-ledger dev` points the stack at: the embeddings function's own model."""

from __future__ import annotations

import subprocess
import sys

from context_ledger.embeddings import minilm
from context_ledger.local.own_embeddings import DIMENSIONS, MODEL, variables


def test_the_model_named_is_the_one_the_function_serves() -> None:
    assert (MODEL, DIMENSIONS) == (minilm.MODEL_NAME, minilm.DIMENSIONS)


def test_the_stack_is_pointed_at_its_own_route_with_the_key() -> None:
    assert variables(port=3100, key="ctxl_k") == {
        "KEYSTONE_CONTEXT_EMBEDDINGS_URL": "http://127.0.0.1:3100/api/v1",
        "KEYSTONE_CONTEXT_EMBEDDINGS_MODEL": "all-MiniLM-L6-v2",
        "KEYSTONE_CONTEXT_EMBEDDINGS_DIMENSIONS": "384",
        "KEYSTONE_CONTEXT_EMBEDDINGS_API_KEY": "ctxl_k",
    }


def test_dev_leaves_numpy_unloaded_until_the_runtime_set_the_functions_blas_threads() -> None:
    """OpenBLAS reads OPENBLAS_NUM_THREADS once, when numpy loads: loaded before the runtime
    applies the template's 1, MiniLM ran at a quarter of its speed on two busy cores."""
    code = (
        "import sys\n"
        "import context_ledger.cli, context_ledger.local.own_embeddings\n"
        "import context_ledger.local.environment, context_ledger.local.runtime\n"
        "assert 'numpy' not in sys.modules, 'numpy loaded'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
