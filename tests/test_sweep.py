"""The sweep (scripts/hf_sweep.py, `make sweep`) on its fixed sample of 24
architectures, dynscope only, held to a budget the way tests/test_models.py
holds the zoo: every one builds, every output equals eager's exactly, and
all 24 are one graph with no break (bloom's GeLU is a
torch.autograd.Function: tr_autograd.c; mixtral's experts a custom op of
torch.ops: tensorops_library.c).  The full table, side by side with
Dynamo, is docs/sweep.md."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

pytest.importorskip("transformers", exc_type=ImportError)
pytest.importorskip("torch", exc_type=ImportError)

from conftest import skip_transformers_under_asan  # noqa: E402

import hf_sweep  # noqa: E402

ONE_GRAPH_BUDGET = 24


@skip_transformers_under_asan
def test_the_sample_builds_is_exact_and_mostly_one_graph(tmp_path):
    results, doc = tmp_path / "sample.jsonl", tmp_path / "sweep.md"
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "hf_sweep.py"), "--sample",
                    "--systems", "dynscope", "--reps", "2", "--results", str(results),
                    "--out", str(doc)], cwd=ROOT, check=True, capture_output=True, timeout=900)
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert sorted(r["type"] for r in rows) == sorted(hf_sweep.SAMPLE)
    failed = [(r["type"], r.get("error")) for r in rows if "error" in r or "error" in r["dynscope"]]
    assert failed == []
    wrong = [r["type"] for r in rows if not r["dynscope"]["equal"]]
    assert wrong == []
    one = [r["type"] for r in rows if hf_sweep.one_graph(r, "dynscope")]
    assert len(one) >= ONE_GRAPH_BUDGET, sorted(set(hf_sweep.SAMPLE) - set(one))
    text = doc.read_text()
    assert f"| dynscope: one graph, no break | {len(one)} |" in text
    assert "| dynscope: outputs not equal to eager's (nor to eager's run as compiled) | 0 |" in text


def test_a_config_is_made_small_through_its_attribute_map_and_sub_configs():
    import transformers
    cfg = transformers.AutoConfig.for_model("gpt2")           # n_embd, n_layer: mapped names
    hf_sweep.shrink(cfg, {})
    assert (cfg.n_embd, cfg.n_layer, cfg.n_head, cfg.vocab_size) == (64, 2, 4, 256)
    assert cfg.eos_token_id < 256 and cfg.bos_token_id < 256
    cfg = transformers.AutoConfig.for_model("swin")           # per-stage lists stay lists
    hf_sweep.shrink(cfg, {})
    assert isinstance(cfg.num_heads, list) and cfg.depths == [1] * len(cfg.depths)
