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


@skip_transformers_under_asan
def test_the_training_pass_is_bit_exact_with_dropout_and_one_graph_a_step(tmp_path):
    # hf_sweep.py --train: a causal-LM head in training mode, dropout on,
    # the step `loss = model(ids, labels=ids).loss; loss.backward()`
    # captured whole.  The loss and every gradient equal eager's bit for
    # bit on the capturing call and on a hit; llama's and opt's forward
    # and loss are one graph, backward the step's one eager call
    results, doc = tmp_path / "train.jsonl", tmp_path / "sweep.md"
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "hf_sweep.py"), "--train",
                    "--types", "llama,opt", "--systems", "dynscope", "--reps", "1",
                    "--train-results", str(results), "--results", str(tmp_path / "none.jsonl"),
                    "--out", str(doc)], cwd=ROOT, check=True, capture_output=True, timeout=600)
    rows = {r["type"]: r for r in map(json.loads, results.read_text().splitlines())}
    assert sorted(rows) == ["llama", "opt"]
    for t, r in rows.items():
        assert r["class"].endswith("ForCausalLM"), r
        assert r["eager_repeats"] is True, t          # the seed fixes dropout's masks
        ds = r["dynscope"]
        assert ds["equal"] is True, (t, ds)
        assert (ds["graphs"], ds["breaks"]) == (1, 1), (t, ds)
        assert ds["reasons"][0][0] == "call to .backward(), not a pure tensor method", ds
    text = doc.read_text()
    assert "| dynscope: one graph a step | 2 |" in text
    assert "| dynscope: loss or a gradient not bit-equal to eager's | 0 |" in text


def test_train_mode_turns_every_dropout_of_a_config_on():
    import transformers
    cfg = transformers.AutoConfig.for_model("llama")
    assert cfg.attention_dropout == 0.0
    hf_sweep.dropout_on(cfg, 0.1)
    assert cfg.attention_dropout == 0.1
    cfg = transformers.AutoConfig.for_model("gpt2")          # kept where already higher
    cfg.resid_pdrop = 0.3
    hf_sweep.dropout_on(cfg, 0.1)
    assert (cfg.resid_pdrop, cfg.embd_pdrop, cfg.attn_pdrop) == (0.3, 0.1, 0.1)
