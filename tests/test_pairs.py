import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posembed.encode.pairs import encode_texts
from posembed.errors import TextTooLongError
from posembed.interop.hf import load_embeddings
from tests.helpers import assert_close

transformers = pytest.importorskip("transformers")

TEXTS_A = ["The cat sat on the mat.", "Hello!", "Positional encodings tell a transformer where each token is."]
TEXTS_B = ["Did it?", "Yes, it sat there all afternoon, quite still.", "Order matters."]


@pytest.fixture(scope="module")
def tokenizer(minilm_path):
    return transformers.AutoTokenizer.from_pretrained(str(minilm_path))


@pytest.fixture()
def left_padding(tokenizer):
    tokenizer.padding_side = "left"
    yield tokenizer
    tokenizer.padding_side = "right"


def _assert_same_as_tokenizer(batch, expected):
    assert torch.equal(batch.input_ids, expected["input_ids"])
    assert torch.equal(batch.token_type_ids, expected["token_type_ids"])
    assert torch.equal(batch.attention_mask, expected["attention_mask"])
    assert batch.position_ids.tolist() == _positions_by_hand(expected["attention_mask"].tolist())


def _positions_by_hand(mask: list[list[int]]) -> list[list[int]]:
    """Real tokens count 0, 1, 2, ... in each row; padding gets 0 (plain Python, not the library)."""
    rows = []
    for row in mask:
        count, positions = 0, []
        for real in row:
            positions.append(count if real else 0)
            count += bool(real)
        rows.append(positions)
    return rows


def test_hand_positions_of_a_right_and_a_left_padded_row():
    assert _positions_by_hand([[1, 1, 1, 0], [0, 0, 1, 1]]) == [[0, 1, 2, 0], [0, 0, 0, 1]]


def test_pairs_equal_the_tokenizer_output(tokenizer):
    batch = encode_texts(tokenizer, TEXTS_A, TEXTS_B)
    _assert_same_as_tokenizer(batch, tokenizer(TEXTS_A, TEXTS_B, padding=True, return_tensors="pt"))
    # [CLS] A [SEP] B [SEP]: segment 1 starts right after the first [SEP]
    row = batch.input_ids[0].tolist()
    first_sep = row.index(tokenizer.sep_token_id)
    assert row[0] == tokenizer.cls_token_id
    assert batch.token_type_ids[0, : first_sep + 1].eq(0).all() and batch.token_type_ids[0, first_sep + 1] == 1


def test_single_texts_equal_the_tokenizer_output(tokenizer):
    batch = encode_texts(tokenizer, TEXTS_A)
    _assert_same_as_tokenizer(batch, tokenizer(TEXTS_A, padding=True, return_tensors="pt"))
    assert batch.token_type_ids.eq(0).all()
    one = encode_texts(tokenizer, "hello world", "bye")
    _assert_same_as_tokenizer(one, tokenizer("hello world", "bye", return_tensors="pt"))


def test_left_padding_equals_the_tokenizer_and_keeps_positions(left_padding):
    batch = encode_texts(left_padding, TEXTS_A, TEXTS_B)
    _assert_same_as_tokenizer(batch, left_padding(TEXTS_A, TEXTS_B, padding=True, return_tensors="pt"))
    assert batch.attention_mask[:, -1].eq(1).all() and batch.attention_mask[:, 0].eq(0).any()
    for row in range(3):
        real = batch.attention_mask[row].bool()
        assert torch.equal(batch.position_ids[row, real], torch.arange(int(real.sum())))


def test_left_and_right_padding_embed_real_tokens_the_same(tokenizer, minilm_path):
    emb = load_embeddings(minilm_path).eval()
    right = encode_texts(tokenizer, TEXTS_A, TEXTS_B)
    tokenizer.padding_side = "left"
    try:
        left = encode_texts(tokenizer, TEXTS_A, TEXTS_B)
    finally:
        tokenizer.padding_side = "right"
    with torch.no_grad():
        out_right, out_left = emb(**right.embedding_inputs()), emb(**left.embedding_inputs())
    for row in range(3):
        assert_close(out_left[row, left.attention_mask[row].bool()], out_right[row, right.attention_mask[row].bool()])


def test_padding_modes(tokenizer):
    padded = encode_texts(tokenizer, TEXTS_A, max_length=40, padding="max_length")
    _assert_same_as_tokenizer(padded, tokenizer(TEXTS_A, padding="max_length", max_length=40, return_tensors="pt"))
    same = encode_texts(tokenizer, ["one two", "three four"], padding=False)
    assert same.input_ids.shape == (2, 4) and same.attention_mask.eq(1).all()
    with pytest.raises(ValueError, match=r"padding=False but the rows have different lengths \[5, 3\]"):
        encode_texts(tokenizer, ["one two three", "x"], padding=False)
    with pytest.raises(ValueError, match="padding must be"):
        encode_texts(tokenizer, "x", padding="sideways")


def test_text_too_long_for_the_position_table_names_both_numbers(tokenizer):
    long_text = " ".join(["word"] * 600)
    with pytest.raises(ValueError, match=r"text 1 encodes to 602 tokens.*max_length=512 positions"):
        encode_texts(tokenizer, ["short", long_text])
    with pytest.raises(ValueError, match=r"text 0 encodes to 8 tokens \(\[CLS\] A \[SEP\] B \[SEP\]\).*max_length=6"):
        encode_texts(tokenizer, "one two three", "four five", max_length=6)
    assert encode_texts(tokenizer, "one two three", "four five", max_length=8).input_ids.shape == (1, 8)


def test_bad_text_lists(tokenizer):
    with pytest.raises(ValueError, match="texts_a has 2 texts but texts_b has 1"):
        encode_texts(tokenizer, ["a", "b"], ["c"])
    with pytest.raises(ValueError, match="texts_a is empty"):
        encode_texts(tokenizer, [])
    with pytest.raises(TypeError, match="texts must be strings, got int"):
        encode_texts(tokenizer, ["a", 3])
    with pytest.raises(ValueError, match="max_length must be an int >= 2"):
        encode_texts(tokenizer, "a", max_length=1)


def test_tokenizer_without_special_tokens_is_refused():
    class NoCls:
        cls_token_id, sep_token_id = None, 3

    with pytest.raises(ValueError, match=r"NoCls has no \[CLS\]/\[SEP\] token"):
        encode_texts(NoCls(), "a")


def test_the_length_error_carries_its_numbers_and_truncation_is_recorded(tokenizer):
    from posembed.errors import TextTooLongError

    with pytest.raises(TextTooLongError) as error:
        encode_texts(tokenizer, ["short", " ".join(["word"] * 600)])
    assert (error.value.index, error.value.tokens, error.value.limit, error.value.layout) == (
        1,
        602,
        512,
        "[CLS] A [SEP]",
    )
    cut = encode_texts(tokenizer, ["one two three four", "one"], max_length=4, truncation=True)
    assert cut.full_lengths == (6, 3) and cut.truncated
    whole = encode_texts(tokenizer, ["one two three four", "one"], max_length=6, truncation=True)
    assert whole.full_lengths == (6, 3) and not whole.truncated


def test_transformers_own_length_warning_is_not_raised(tokenizer, monkeypatch):
    """posembed checks the length itself: the tokenizer is called with verbose=False when it takes it."""
    import functools

    seen = []
    call = type(tokenizer).__call__

    @functools.wraps(call)
    def spy(self, *args, **kwargs):
        seen.append(kwargs.get("verbose"))
        return call(self, *args, **kwargs)

    monkeypatch.setattr(type(tokenizer), "__call__", spy)
    with pytest.raises(ValueError):
        encode_texts(tokenizer, " ".join(["word"] * 600))
    assert seen == [False]


WORDS = ["the", "cat", "sat", "on", "mat", "positional", "encodings", "transformer", "hello", "!", "order", "zyzzyva"]
_text = st.lists(st.sampled_from(WORDS), min_size=0, max_size=12).map(" ".join)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), max_length=st.integers(3, 24), left=st.booleans())
def test_truncated_pairs_equal_the_tokenizer_s_longest_first_tensor_for_tensor(tokenizer, data, max_length, left):
    """Full-tensor parity with ``tokenizer(a, b, truncation="longest_first", padding=True)``."""
    rows = data.draw(st.integers(1, 4))
    texts_a, texts_b = (
        data.draw(st.lists(_text, min_size=rows, max_size=rows)),
        data.draw(st.lists(_text, min_size=rows, max_size=rows)),
    )
    tokenizer.padding_side = "left" if left else "right"
    try:
        batch = encode_texts(tokenizer, texts_a, texts_b, max_length=max_length, truncation=True)
        expected = tokenizer(
            texts_a, texts_b, truncation="longest_first", padding=True, max_length=max_length, return_tensors="pt"
        )
        full = tokenizer(texts_a, texts_b)["input_ids"]
    finally:
        tokenizer.padding_side = "right"
    _assert_same_as_tokenizer(batch, expected)
    assert batch.full_lengths == tuple(len(ids) for ids in full)
    assert batch.truncated == any(len(ids) > max_length for ids in full)


def _roberta_style_tokenizer():
    """A word-level tokenizer with RoBERTa's pair layout ``<s> A </s></s> B </s>``, built here (no download)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocab = {word: index for index, word in enumerate(["<pad>", "<s>", "</s>", "<unk>", *WORDS])}
    inner = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    inner.pre_tokenizer = pre_tokenizers.Whitespace()
    inner.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B:1 </s>:1", special_tokens=[("<s>", 1), ("</s>", 2)]
    )
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=inner,
        cls_token="<s>",
        sep_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        model_max_length=16,
    )


def test_the_tokenizer_s_own_pair_layout_is_used_not_bert_s():
    """A tokenizer whose pairs are ``<s> A </s></s> B </s>`` gets its own layout, segment ids and limit."""
    roberta = _roberta_style_tokenizer()
    batch = encode_texts(roberta, ["the cat", "hello"], ["sat", "order !"])
    expected = roberta(
        ["the cat", "hello"], ["sat", "order !"], padding=True, return_token_type_ids=True, return_tensors="pt"
    )
    _assert_same_as_tokenizer(batch, expected)
    assert batch.input_ids[0].tolist() == [1, 4, 5, 2, 2, 6, 2]
    assert batch.token_type_ids[0].tolist() == [0, 0, 0, 0, 0, 1, 1]
    with pytest.raises(TextTooLongError, match=r"text 0 encodes to 17 tokens .*max_length=16"):
        encode_texts(roberta, " ".join(["cat"] * 9), " ".join(["mat"] * 4))


def test_padding_needs_a_pad_token_and_max_length_padding_needs_a_limit():
    roberta = _roberta_style_tokenizer()
    roberta.pad_token = None
    assert encode_texts(roberta, ["the cat", "on mat"]).input_ids.shape == (2, 4)  # equal rows: nothing to pad
    with pytest.raises(ValueError, match=r"pad(ding)? token"):
        encode_texts(roberta, ["the cat sat", "hello"])
    roberta.model_max_length = int(1e30)  # Hugging Face's "no limit"
    with pytest.raises(ValueError, match=r"padding='max_length' needs max_length"):
        encode_texts(roberta, "the cat", padding="max_length")
