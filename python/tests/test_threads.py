"""The GIL is released while running: two threads run one compiled program at once."""
import threading

import numpy as np

import kiln


def test_two_threads_one_program(test_model):
    model = kiln.parse_onnx(test_model("mlp_dynamic.onnx"), map_input_dims={"x": [64, 4]})
    model.compile(kiln.get_target("cpu"))
    rng = np.random.RandomState(3)
    xs = [rng.randn(64, 4).astype(np.float32) for _ in range(2)]
    expected = [np.asarray(model.run({"x": x})[0]).copy() for x in xs]
    errors, results = [], [[], []]

    def worker(k):
        try:
            for _ in range(50):
                results[k].append(np.asarray(model.run({"x": xs[k]})[0]).copy())
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for k in range(2):
        assert len(results[k]) == 50
        for r in results[k]:
            assert np.array_equal(r, expected[k])


def test_run_async(test_model):
    model = kiln.parse_onnx(test_model("add_relu.onnx"))
    model.compile(kiln.get_target("cpu"))
    x = np.full((2, 3), 2, np.float32)
    pending = model.run_async({"x": x, "y": -x / 2})
    out = pending.result()
    assert pending.done()
    assert np.array_equal(np.asarray(out[0]), np.ones((2, 3), np.float32))


def test_a_benchmark_warms_up_until_the_target_has_tried_its_ways(test_model):
    """On two threads the cpu target's first runs try a thread team and no team; warming_up()
    says when that is over, and run_note() what it measured."""
    model = kiln.parse_onnx(test_model("add_relu.onnx"))
    model.compile(kiln.get_target("cpu"))
    x = np.full((2, 3), 2, np.float32)
    if not model.warming_up():  # one core: nothing to try
        return
    runs = 0
    while model.warming_up() and runs < 100:
        model.run({"x": x, "y": -x / 2})
        runs += 1
    assert 0 < runs < 100 and not model.warming_up()
    assert "(measured: " in model.run_note(), model.run_note()
