"""A program with dynamic inputs compiles once into a generic program that runs every shape;
shapes that come back get specializations compiled in the background, at most
max_specializations of them (least recently used dropped); the stats report what it did."""
import threading

import numpy as np

import kiln


def _dynamic_mlp(test_model, max_specializations, specialize_after=1):
    model = kiln.parse_onnx(test_model("mlp_dynamic.onnx"), map_dyn_input_dims={"x": [{"min": 1, "max": 64}, 4]})
    model.compile(kiln.get_target("ref"), max_specializations=max_specializations, specialize_after=specialize_after)
    return model


def test_generic_program_runs_new_shapes_without_compiling(test_model):
    model = _dynamic_mlp(test_model, 8, specialize_after=0)
    rng = np.random.RandomState(2)
    for rows in range(1, 41):
        x = rng.randn(rows, 4).astype(np.float32)
        assert np.asarray(model.run({"x": x})[0]).shape[0] == rows
    s = model.get_specialization_stats()
    assert s["generic"] and s["generic_unavailable"] == ""
    assert (s["compiles"], s["generic_runs"], s["cached"]) == (0, 40, 0)


def test_stats_count_compiles_hits_and_evictions(test_model):
    model = _dynamic_mlp(test_model, 2)
    assert model.get_specialization_stats()["compiles"] == 0
    rng = np.random.RandomState(0)
    # 1, 2 compile; 1 hits; 3 compiles and drops 2; 2 (dropped once) runs on the generic program
    for rows in [1, 2, 1, 3, 2]:
        out = np.asarray(model.run({"x": rng.randn(rows, 4).astype(np.float32)})[0])
        assert out.shape[0] == rows
        model.finish_specializations()
    s = model.get_specialization_stats()
    assert (s["compiles"], s["hits"], s["evictions"], s["cached"]) == (3, 1, 1, 2)
    assert s["generic_runs"] == 4 and s["background_compiles"] == 3
    assert s["max_specializations"] == 2 and s["failed_compiles"] == 0 and s["compile_ms"] > 0
    assert model.get_memory_usage()["parameter_bytes"] == 2 * 4 * 4  # the last run's shapes


def test_static_program_has_no_specializations(test_model):
    model = kiln.parse_onnx(test_model("mlp_dynamic.onnx"), map_input_dims={"x": [3, 4]})
    model.compile(kiln.get_target("ref"))
    model.run({"x": np.zeros((3, 4), np.float32)})
    assert model.get_specialization_stats()["compiles"] == 0


def test_threads_with_different_shapes_get_their_own_results(test_model):
    model = _dynamic_mlp(test_model, 0)  # 0: unbounded
    rng = np.random.RandomState(1)
    xs = {rows: rng.randn(rows, 4).astype(np.float32) for rows in (1, 5, 9, 17)}
    expected = {rows: np.asarray(model.run({"x": x})[0]).copy() for rows, x in xs.items()}
    errors = []

    def worker(rows):
        try:
            for _ in range(20):
                np.testing.assert_array_equal(np.asarray(model.run({"x": xs[rows]})[0]), expected[rows])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(rows,)) for rows in xs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    model.finish_specializations()
    s = model.get_specialization_stats()
    assert s["compiles"] == 4 and s["cached"] == 4 and s["max_specializations"] == 0


def test_bound_survives_save_and_load(test_model, tmp_path):
    model = _dynamic_mlp(test_model, 3)
    path = str(tmp_path / "mlp.kiln")
    kiln.save(model, path)
    again = kiln.load(path)
    for rows in range(1, 6):
        again.run({"x": np.zeros((rows, 4), np.float32)})
        again.finish_specializations()
    s = again.get_specialization_stats()
    assert (s["max_specializations"], s["cached"], s["evictions"]) == (3, 3, 2)


def test_default_dims_stay_dynamic_and_buckets_pad_between(test_model, tmp_path):
    """With no option mlp_dynamic's symbolic batch is dynamic (lens() gives the default shape);
    with buckets, a batch in between runs padded on the next bucket's program and gives what a
    static program for that batch gives."""
    path = test_model("mlp_dynamic.onnx")
    model = kiln.parse_onnx(path)
    assert model.get_inputs()["x"].lens() == [1, 4]
    model.compile(kiln.get_target("cpu"), dynamic_buckets={"batch": [2, 8]})
    rng = np.random.RandomState(5)
    for rows in (3, 8, 1, 6):
        x = rng.randn(rows, 4).astype(np.float32)
        static = kiln.parse_onnx(path, default_dim_value=rows)
        static.compile(kiln.get_target("cpu"))
        got = np.asarray(model.run({"x": x})[0])
        assert got.shape == (rows, 3)
        np.testing.assert_allclose(got, np.asarray(static.run({"x": x})[0]), rtol=1e-5, atol=1e-6)
    s = model.get_specialization_stats()
    assert s["padded_runs"] == 3
    kiln.save(model, str(tmp_path / "m.kiln"))
    again = kiln.load(str(tmp_path / "m.kiln"))
    x = rng.randn(5, 4).astype(np.float32)
    np.testing.assert_allclose(np.asarray(again.run({"x": x})[0]), np.asarray(model.run({"x": x})[0]), rtol=0, atol=0)
    assert again.get_specialization_stats()["padded_runs"] == 1
