import numpy as np
import pytest

from softmax_scale.train import tasks
from softmax_scale.train.data import heldout_bytes


@pytest.fixture(scope="module")
def text():
    return heldout_bytes()


@pytest.mark.parametrize(("length", "m"), [(64, 32), (128, 40), (33, 32), (16, 1)])
def test_copy_source_really_is_m_bytes_back(text, length, m):
    b = tasks.copy_batch(text, length, m, 5, np.random.default_rng(0))
    full = np.concatenate([b.batch.inputs[:, :1], b.batch.targets], axis=1)  # the length + 1 bytes
    scored = b.batch.weights > 0
    rows, t = np.nonzero(scored)
    assert np.array_equal(full[rows, t + 1], full[rows, t + 1 - m])
    assert np.array_equal(b.source[rows, t], t + 1 - m)
    assert np.array_equal(b.batch.inputs[rows, b.source[rows, t]], b.batch.targets[rows, t])


def test_copy_scores_from_the_second_copy_on(text):
    b = tasks.copy_batch(text, 100, 30, 2, np.random.default_rng(1))
    assert np.array_equal(np.nonzero(b.batch.weights[0])[0], np.arange(29, 100))
    assert np.all(b.source[:, :29] == -1)
    assert np.all(b.distance == 30)


def test_inputs_and_targets_are_one_sequence_shifted(text):
    b = tasks.copy_batch(text, 50, 20, 3, np.random.default_rng(2))
    assert np.array_equal(b.batch.inputs[:, 1:], b.batch.targets[:, :-1])


def test_the_segment_is_held_out_text(text):
    b = tasks.copy_batch(text, 40, 20, 1, np.random.default_rng(3))
    seg = bytes(b.batch.inputs[0, :20].astype(np.uint8))
    assert seg in bytes(text)


def test_the_control_scores_the_same_bytes_without_the_copy(text):
    a = tasks.copy_batch(text, 64, 32, 4, np.random.default_rng(5))
    c = tasks.copy_control(text, 64, 32, 4, np.random.default_rng(5))
    w = a.batch.weights > 0
    assert np.array_equal(c.batch.weights, a.batch.weights)
    assert np.array_equal(c.batch.targets[w], a.batch.targets[w])
    assert not np.array_equal(c.batch.inputs[:, :31], a.batch.inputs[:, :31])


@pytest.mark.parametrize("depth", [0.0, 0.25, 0.5, 1.0])
def test_passkey_digits_appear_only_in_the_key_line_and_the_answer(depth):
    b = tasks.passkey_batch(256, depth, 6, np.random.default_rng(7))
    for i in range(6):
        full = bytes(np.concatenate([b.batch.inputs[i, :1], b.batch.targets[i]]).astype(np.uint8)).decode()
        key = full[-5:]
        assert key.isdigit()
        prompt = full[:-5]
        assert prompt.count(tasks.PASSKEY_LINE.format(key=key)) == 1
        assert sum(ch.isdigit() for ch in prompt) == 10  # the key twice, in its one line
        assert prompt.endswith(tasks.QUESTION)


def test_passkey_source_points_at_the_same_digits():
    b = tasks.passkey_batch(300, 0.3, 4, np.random.default_rng(8))
    rows, t = np.nonzero(b.batch.weights)
    assert np.array_equal(b.batch.inputs[rows, b.source[rows, t]], b.batch.targets[rows, t])
    assert np.all(b.distance > 0)


def test_passkey_depth_moves_the_line():
    near = tasks.passkey_batch(400, 0.0, 1, np.random.default_rng(9))
    far = tasks.passkey_batch(400, 1.0, 1, np.random.default_rng(9))
    assert near.distance[0] > far.distance[0]


def test_first_answer_is_the_first_bit():
    b = tasks.first_batch(20, 50, np.random.default_rng(10))
    assert np.all(b.inputs[:, 0] == tasks.FIRST_VOCAB.index("$"))
    assert np.array_equal(b.labels, b.inputs[:, 1])
    assert set(np.unique(b.inputs[:, 1:])) <= {0, 1}
    assert 0 < b.labels.mean() < 1


@pytest.mark.parametrize(("call", "name"), [
    (lambda t: tasks.copy_batch(t, 64, 0, 1, np.random.default_rng(0)), "distance"),
    (lambda t: tasks.copy_batch(t, 64, 64, 1, np.random.default_rng(0)), "distance"),
    (lambda t: tasks.passkey_batch(256, 1.5, 1, np.random.default_rng(0)), "depth"),
    (lambda t: tasks.passkey_batch(256, -0.1, 1, np.random.default_rng(0)), "depth"),
    (lambda t: tasks.passkey_batch(40, 0.5, 1, np.random.default_rng(0)), "length"),
    (lambda t: tasks.first_batch(0, 1, np.random.default_rng(0)), "n"),
])
def test_bad_input_is_one_clear_error(text, call, name):
    with pytest.raises(ValueError, match=f"`{name}`"):
        call(text)


def test_a_non_number_depth_is_a_type_error():
    with pytest.raises(TypeError, match="`depth`"):
        tasks.passkey_batch(256, "half", 1, np.random.default_rng(0))


def test_the_training_mix_keeps_the_natural_rows_and_makes_copies_and_prompts():
    from softmax_scale.train.config import TrainConfig
    from softmax_scale.train.tasks import MIX_DISTANCES, passkey_min_length, train_batch

    c = TrainConfig(objective="causal", train_length=128, batch=16, copy_share=0.25, passkey_share=0.125)
    plain = c.replace(copy_share=0.0, passkey_share=0.0)
    seed = np.random.SeedSequence(5)
    mixed, natural = train_batch(c, seed, 7), train_batch(plain, seed, 7)
    np.testing.assert_array_equal(mixed.inputs[:10], natural.inputs[:10])
    np.testing.assert_array_equal(mixed.targets[:, :-1], mixed.inputs[:, 1:])
    assert np.all(mixed.weights == 1.0)
    lo, hi = (round(f * 128) for f in MIX_DISTANCES)
    for row in mixed.inputs[10:14]:  # a copy: some period m in [L/8, L/2] holds for the whole row
        periods = [m for m in range(lo, hi + 1) if np.array_equal(row[m:], row[:-m])]
        assert periods
    for row in mixed.inputs[14:]:
        text = bytes(row.astype(np.uint8)).decode()
        assert "The pass key is" in text
    assert passkey_min_length() < 128
    assert c.describe() != plain.describe()
    assert "copy_share" not in plain.describe()


@pytest.mark.parametrize("changes, name", [({"copy_share": 0.5}, "objective"), ({"objective": "causal", "copy_share": 1.5}, "copy_share"),
                                           ({"objective": "causal", "copy_share": 0.6, "passkey_share": 0.6}, "at most 1"),
                                           ({"objective": "causal", "passkey_share": 0.1, "train_length": 64}, "train_length")])
def test_a_bad_training_mix_is_refused_by_name(changes, name):
    from softmax_scale.train.config import TrainConfig

    with pytest.raises(ValueError, match=name):
        TrainConfig(**changes)
