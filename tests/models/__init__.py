"""The model zoo (issue 18): tiny random-init models, built from configs
only -- no weights, no network (HF_HUB_OFFLINE=1) -- that scripts/model_zoo.py
measures (docs/models.md) and tests/test_models.py holds to a break budget.

Each builder takes nothing and returns (model, args, kwargs): the model in
eval mode, its inputs (batch 2, sequence 16, width 64, 2 layers),
deterministic under torch.manual_seed(0).  Five transformers architectures
(and two more: BART, Mistral) and two torch.nn models of our own (a CNN,
an LSTM).
"""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

BATCH, SEQ, WIDTH, LAYERS, VOCAB = 2, 16, 64, 2, 256
# token ids inside the small vocabulary (configs default to GPT-2's 50256)
IDS = dict(bos_token_id=1, eos_token_id=2, pad_token_id=0)


def _tokens():
    return torch.randint(3, VOCAB, (BATCH, SEQ))


def gpt2():
    import transformers
    cfg = transformers.GPT2Config(n_layer=LAYERS, n_embd=WIDTH, n_head=2, vocab_size=VOCAB,
                                  n_positions=64, **IDS)
    return transformers.GPT2LMHeadModel(cfg), (_tokens(),), {}


def bert():
    import transformers
    cfg = transformers.BertConfig(num_hidden_layers=LAYERS, hidden_size=WIDTH, num_attention_heads=2,
                                  intermediate_size=2 * WIDTH, vocab_size=VOCAB,
                                  max_position_embeddings=64, pad_token_id=0)
    return transformers.BertModel(cfg), (_tokens(),), {}


def llama():
    import transformers
    cfg = transformers.LlamaConfig(num_hidden_layers=LAYERS, hidden_size=WIDTH, num_attention_heads=2,
                                   num_key_value_heads=2, intermediate_size=2 * WIDTH,
                                   vocab_size=VOCAB, max_position_embeddings=64, **IDS)
    return transformers.LlamaForCausalLM(cfg), (_tokens(),), {}


def t5():
    import transformers
    cfg = transformers.T5Config(num_layers=LAYERS, num_decoder_layers=LAYERS, d_model=WIDTH, d_kv=32,
                                num_heads=2, d_ff=2 * WIDTH, vocab_size=VOCAB,
                                decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    ids = _tokens()
    return transformers.T5ForConditionalGeneration(cfg), (ids,), {"decoder_input_ids": ids}


def vit():
    import transformers
    cfg = transformers.ViTConfig(num_hidden_layers=LAYERS, hidden_size=WIDTH, num_attention_heads=2,
                                 intermediate_size=2 * WIDTH, image_size=32, patch_size=8)
    return transformers.ViTModel(cfg), (torch.randn(BATCH, 3, 32, 32),), {}


def bart():
    # an encoder-decoder whose cache build copies and rewrites its config
    # (copy.deepcopy, strict dataclass validation through typing; its table
    # of validators keyed by typing forms still breaks: a guard may not hold
    # the program's key objects)
    import transformers
    cfg = transformers.BartConfig(encoder_layers=LAYERS, decoder_layers=LAYERS, d_model=WIDTH,
                                  encoder_attention_heads=2, decoder_attention_heads=2,
                                  encoder_ffn_dim=2 * WIDTH, decoder_ffn_dim=2 * WIDTH,
                                  vocab_size=VOCAB, max_position_embeddings=64, **IDS)
    ids = _tokens()
    return transformers.BartForConditionalGeneration(cfg), (ids,), {"decoder_input_ids": ids}


def mistral():
    # sliding-window masks made of closures, an environment read in sdpa
    import transformers
    cfg = transformers.MistralConfig(num_hidden_layers=LAYERS, hidden_size=WIDTH, num_attention_heads=2,
                                     num_key_value_heads=1, intermediate_size=2 * WIDTH,
                                     vocab_size=VOCAB, max_position_embeddings=64, **IDS)
    return transformers.MistralForCausalLM(cfg), (_tokens(),), {}


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv1(x)))
        x = torch.relu(self.conv2(x))
        x = x.mean(dim=(2, 3))
        return self.head(x)


class SmallLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.lstm = nn.LSTM(WIDTH, WIDTH, num_layers=LAYERS, batch_first=True)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, ids):
        out, _ = self.lstm(self.embed(ids))
        return self.head(out[:, -1])


def cnn():
    return SmallCNN(), (torch.randn(BATCH, 3, 32, 32),), {}


def lstm():
    return SmallLSTM(), (_tokens(),), {}


BUILDERS = {"gpt2": gpt2, "bert": bert, "llama": llama, "t5": t5, "vit": vit, "bart": bart,
            "mistral": mistral, "cnn": cnn, "lstm": lstm}
NEEDS_TRANSFORMERS = {"gpt2", "bert", "llama", "t5", "vit", "bart", "mistral"}


def build(name, seed=0):
    """(model, args, kwargs) of zoo model `name`, eval mode, seeded."""
    torch.manual_seed(seed)
    model, args, kwargs = BUILDERS[name]()
    model.eval()
    return model, args, kwargs


def leaves(out):
    """The tensors of a model's output, in order: ModelOutput, tuples,
    lists and dicts walked; None skipped."""
    if isinstance(out, torch.Tensor):
        return [out]
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in leaves(o)]
    return []


def same_output(a, b):
    """Whether two outputs are exactly equal, tensor by tensor."""
    la, lb = leaves(a), leaves(b)
    return len(la) == len(lb) > 0 and all(
        x.shape == y.shape and x.dtype == y.dtype and torch.equal(x, y) for x, y in zip(la, lb))
