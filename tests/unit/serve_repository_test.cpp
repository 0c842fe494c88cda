// The model repository: versions chosen by the policy, the compiled .kiln cached beside
// the .onnx, and the swap of a reload (requests holding the old model finish on it; a
// failed reload keeps the old one serving; concurrent requests never fail).
#include "serve/infer.hpp"
#include "serve/model_repository.hpp"

#include <kiln/target.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>
#include <unistd.h>

using namespace kiln::serve;
namespace fs = std::filesystem;

namespace {

const std::string add_relu = std::string(KILN_SOURCE_DIR) + "/tests/data/models/add_relu.onnx";

struct temp_repo {
    fs::path root = fs::temp_directory_path() / ("kiln_serve_test_" + std::to_string(::getpid()));
    temp_repo() {
        fs::remove_all(root);
        for (auto v : {"1", "2"}) {
            fs::create_directories(root / "m" / v);
            fs::copy_file(add_relu, root / "m" / v / "model.onnx");
        }
        write_config("parameters { key: \"kiln.target\" value: { string_value: \"ref\" } }\n");
    }
    ~temp_repo() { fs::remove_all(root); }
    void write_config(const std::string& text) { std::ofstream(root / "m" / "config.pbtxt") << text; }
};

infer_request small_request(float value) {
    infer_request r;
    r.model = "m";
    for (auto name : {"x", "y"}) {
        infer_input in;
        in.name = name;
        in.datatype = "FP32";
        in.shape = {2, 3};
        in.data.count = 6;
        in.data.fill = [value](const kiln::argument& dst) {
            for (int i = 0; i < 6; ++i) dst.data_as<float>()[i] = value;
        };
        r.inputs.push_back(std::move(in));
    }
    return r;
}

}  // namespace

TEST(serve_repository, loads_the_latest_version_and_caches_the_compiled_program) {
    temp_repo t;
    model_repository repo(t.root.string());
    EXPECT_EQ(repo.model_names(), std::vector<std::string>{"m"});
    repo.load("m");
    auto m = repo.find("m");
    EXPECT_EQ(m->version, 2);  // latest { num_versions: 1 } by default
    EXPECT_FALSE(repo.is_ready("m", 1));
    EXPECT_EQ(infer(repo, small_request(0.5f)).outputs[0].data.to_vector<float>(), std::vector<float>(6, 1.0f));
    bool cached = false;
    for (auto& e : fs::directory_iterator(t.root / "m" / "2"))
        cached = cached || (e.path().extension() == ".kiln" && e.path().filename().string().starts_with("model.onnx."));
    EXPECT_TRUE(cached);
    std::string log;
    model_repository::compile_version((t.root / "m" / "2").string(), parse_model_config(
        "parameters { key: \"kiln.target\" value: { string_value: \"ref\" } }", "m"), &log);
    EXPECT_NE(log.find("loaded the cached"), std::string::npos) << log;

    t.write_config("version_policy: { all: { } }\nparameters { key: \"kiln.target\" value: { string_value: \"ref\" } }\n");
    repo.load("m");
    EXPECT_TRUE(repo.is_ready("m", 1));
    EXPECT_TRUE(repo.is_ready("m", 2));
}

TEST(serve_repository, unknown_and_unloaded_models) {
    temp_repo t;
    model_repository repo(t.root.string());
    auto status = [&](auto f) {
        try {
            f();
        } catch (const serve_error& e) {
            return e.http_status();
        }
        return 200;
    };
    EXPECT_EQ(status([&] { repo.find("nosuch"); }), 404);
    EXPECT_EQ(status([&] { repo.load("nosuch"); }), 404);
    EXPECT_EQ(status([&] { repo.load("../m"); }), 400);
    repo.load("m");
    repo.unload("m");
    EXPECT_EQ(status([&] { repo.find("m"); }), 503);
    EXPECT_TRUE(repo.all_ready());  // unloaded on purpose
}

// `kiln.target gpu` where the gpu cannot run: the load fails with the target's reason (a
// model that turned ready would fail every request), and nothing is compiled or cached.
TEST(serve_repository, a_target_that_cannot_run_here_fails_the_load_with_its_reason) {
    const auto why = kiln::get_target("gpu")->unavailable_reason();
    if (why.empty()) GTEST_SKIP() << "the gpu target runs here";
    temp_repo t;
    t.write_config("parameters { key: \"kiln.target\" value: { string_value: \"gpu\" } }\n");
    model_repository repo(t.root.string());
    try {
        repo.load("m");
        FAIL() << "loaded for a target that cannot run";
    } catch (const serve_error& e) {
        EXPECT_EQ(e.http_status(), 400);
        EXPECT_NE(std::string(e.what()).find("model 'm' version 2: target gpu is not available here: " + why),
                  std::string::npos) << e.what();
    }
    EXPECT_FALSE(repo.is_ready("m", 2));
    auto index = repo.index();
    ASSERT_EQ(index.size(), 1u);
    EXPECT_EQ(index[0].state, "UNAVAILABLE");
    EXPECT_NE(index[0].reason.find("not available here"), std::string::npos) << index[0].reason;
    for (auto& e : fs::directory_iterator(t.root / "m" / "2")) EXPECT_NE(e.path().extension(), ".kiln") << e.path();
}

TEST(serve_repository, a_reload_swaps_while_requests_hold_the_old_model) {
    temp_repo t;
    model_repository repo(t.root.string());
    repo.load("m");
    auto old = repo.find("m");
    repo.load("m");
    auto fresh = repo.find("m");
    EXPECT_NE(old.get(), fresh.get());
    EXPECT_EQ(old.use_count(), 1);  // only this request holds it: freed when it ends
    EXPECT_EQ(run(*old, small_request(1.0f)).outputs[0].data.to_vector<float>(), std::vector<float>(6, 2.0f));
    EXPECT_EQ(old->stats, fresh->stats);  // counters survive the reload

    // A reload that fails leaves the old one serving.
    t.write_config("optimization { }\n");
    EXPECT_THROW(repo.load("m"), serve_error);
    EXPECT_EQ(repo.find("m").get(), fresh.get());
    EXPECT_TRUE(repo.all_ready());
}

TEST(serve_repository, requests_during_reloads_never_fail) {
    temp_repo t;
    model_repository repo(t.root.string());
    repo.load("m");
    std::atomic<bool> done{false};
    std::atomic<int> failures{0}, answered{0};
    std::vector<std::thread> clients;
    for (int k = 0; k < 3; ++k)
        clients.emplace_back([&] {
            while (!done) {
                try {
                    auto r = infer(repo, small_request(-1.0f));
                    if (r.outputs[0].data.to_vector<float>() != std::vector<float>(6, 0.0f)) failures++;
                    answered++;
                } catch (const std::exception&) {
                    failures++;
                }
            }
        });
    for (int i = 0; i < 5; ++i) repo.load("m");
    while (answered < 20) std::this_thread::yield();
    done = true;
    for (auto& c : clients) c.join();
    EXPECT_EQ(failures, 0);
}

namespace {
const std::string ref_target = "parameters { key: \"kiln.target\" value: { string_value: \"ref\" } }\n";
std::string warmup_config(const std::string& dims_x, const std::string& source_x, int count) {
    return ref_target + "model_warmup [ { name: \"w\" count: " + std::to_string(count) +
           " inputs { key: \"x\" value: { data_type: TYPE_FP32 dims: " + dims_x + " " + source_x + " } }" +
           " inputs { key: \"y\" value: { data_type: TYPE_FP32 dims: [2, 3] random_data: true } } } ]\n";
}
}  // namespace

TEST(serve_repository, model_warmup_runs_before_the_version_turns_ready) {
    temp_repo t;
    fs::create_directories(t.root / "m" / "warmup");
    std::vector<float> x(6, 0.25f);
    std::ofstream(t.root / "m" / "warmup" / "x.bin", std::ios::binary)
        .write(reinterpret_cast<const char*>(x.data()), static_cast<std::streamsize>(x.size() * sizeof(float)));
    t.write_config(warmup_config("[2, 3]", "input_data_file: \"x.bin\"", 200));
    model_repository repo(t.root.string());
    std::atomic<bool> loaded{false};
    std::atomic<int> seen_ready{0}, seen_unwarmed{0};
    std::thread prober([&] {
        while (!loaded) {
            if (repo.is_ready("m")) {
                seen_ready++;
                if (repo.find("m")->warmup_runs != 200) seen_unwarmed++;
            }
        }
    });
    repo.load("m");
    loaded = true;
    prober.join();
    EXPECT_EQ(seen_unwarmed, 0);
    auto m = repo.find("m");
    EXPECT_EQ(m->warmup_runs, 200u);
    EXPECT_EQ(m->stats->success, 0u);  // warm-up runs are not requests
    EXPECT_EQ(infer(repo, small_request(0.5f)).outputs[0].data.to_vector<float>(), std::vector<float>(6, 1.0f));
}

TEST(serve_repository, a_bad_warmup_fails_the_load_and_keeps_the_old_version) {
    temp_repo t;
    model_repository repo(t.root.string());
    repo.load("m");
    auto old = repo.find("m");
    auto reason = [&](const std::string& config) {
        t.write_config(config);
        try {
            repo.load("m");
        } catch (const serve_error& e) {
            EXPECT_EQ(e.http_status(), 400);
            return std::string(e.what());
        }
        return std::string("loaded");
    };
    auto e = reason(warmup_config("[2, 7]", "zero_data: true", 1));
    EXPECT_NE(e.find("model 'm' version 2: model_warmup 'w': input 'x': dimension 1 is 7"), std::string::npos) << e;
    e = reason(warmup_config("[2, 3]", "input_data_file: \"missing.bin\"", 1));
    EXPECT_NE(e.find("'missing.bin' is not a file in the model's warmup/ folder"), std::string::npos) << e;
    fs::create_directories(t.root / "m" / "warmup");
    std::ofstream(t.root / "m" / "warmup" / "short.bin") << "abc";
    e = reason(warmup_config("[2, 3]", "input_data_file: \"short.bin\"", 1));
    EXPECT_NE(e.find("input 'x': input_data_file 'short.bin' holds 3 bytes; shape [2, 3] of FP32 needs 24"), std::string::npos) << e;
    e = reason(ref_target + "model_warmup { name: \"w\" inputs { key: \"z\" value: { data_type: TYPE_FP32 dims: [1] zero_data: true } } }");
    EXPECT_NE(e.find("has no input 'z'"), std::string::npos) << e;
    e = reason(ref_target + "model_warmup { name: \"w\" inputs { key: \"x\" value: { data_type: TYPE_INT64 dims: [2, 3] zero_data: true } } }");
    EXPECT_NE(e.find("datatype INT64, the model expects FP32"), std::string::npos) << e;
    EXPECT_EQ(repo.find("m").get(), old.get());  // still serving
    EXPECT_EQ(infer(repo, small_request(0.5f)).outputs[0].data.to_vector<float>(), std::vector<float>(6, 1.0f));
}

TEST(serve_repository, model_warmup_compiles_the_specializations_of_its_shapes) {
    temp_repo t;
    fs::create_directories(t.root / "d" / "1");
    fs::copy_file(std::string(KILN_SOURCE_DIR) + "/tests/data/models/mlp_dynamic.onnx", t.root / "d" / "1" / "model.onnx");
    std::ofstream(t.root / "d" / "config.pbtxt")
        << ref_target << "max_batch_size: 64\nmodel_warmup [ { name: \"b5\" batch_size: 5 count: 2 inputs { key: \"x\" "
                         "value: { data_type: TYPE_FP32 dims: [4] random_data: true } } } ]\n";
    model_repository repo(t.root.string());
    repo.load("d");
    auto stats = repo.find("d")->prog->get_specialization_stats();
    EXPECT_GE(stats.compiles, 1u);  // batch 5 seen twice: specialized, and finished before ready
    EXPECT_EQ(stats.failed_compiles, 0u);
}

TEST(serve_repository, a_poll_sees_a_changed_warmup_file) {
    temp_repo t;
    fs::create_directories(t.root / "m" / "warmup");
    std::ofstream(t.root / "m" / "warmup" / "x.bin") << std::string(24, '\0');
    t.write_config(warmup_config("[2, 3]", "input_data_file: \"x.bin\"", 1));
    model_repository repo(t.root.string());
    repo.poll();  // the first poll loads it
    auto first = repo.find("m");
    EXPECT_TRUE(repo.poll().empty());  // nothing changed
    std::ofstream(t.root / "m" / "warmup" / "x.bin") << "abc";
    auto log = repo.poll();
    ASSERT_EQ(log.size(), 1u);
    EXPECT_NE(log[0].find("needs 24"), std::string::npos) << log[0];
    EXPECT_EQ(repo.find("m").get(), first.get());  // the old version serves on
}
