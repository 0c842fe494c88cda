#include "targets/cpu/tuning.hpp"

#include "targets/cpu/codegen/isa.hpp"
#include "targets/cpu/cpu_features.hpp"
#include "targets/cpu/sum_post_op.hpp"

#include <kiln/builtin_ops.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>
#include <unordered_map>

#include <omp.h>
#include <unistd.h>

namespace kiln::cpu {

namespace {

// A trial's operand: a buffer of the real operand's layout seen with its logical shape.
// `owns`: the result aliases the buffer (so a residual may be written into it, as
// sum_post_op.hpp requires of the real one).
struct tuning_input {
    shape logical;
    bool owns = true;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.logical, "logical");
        f(self.owns, "owns");
    }
    std::string name() const { return "cpu::tuning_input"; }
    shape compute_shape(const std::vector<shape>&) const { return logical; }
    argument compute(context&, const shape& out, const std::vector<argument>& args) const {
        return argument(out, args.at(0).buffer());
    }
    std::ptrdiff_t output_alias(const std::vector<shape>&) const { return owns ? 0 : -1; }
};

constexpr int warm_up_runs = 2;
// Rounds of every candidate in turn, keeping each one's fastest run: at least min_rounds,
// then more while the problem has taken under round_budget_ms (short kernels get more runs,
// so a noisy neighbour's burst is less likely to decide; ResNet-50's 18 problems, each with
// its rules' trial, take ~5 s with the cache emulation).
constexpr int min_rounds = 5;
constexpr int max_rounds = 25;
constexpr double round_budget_ms = 60.0;
// A trial measures a kernel alone; in the network the same kernel can run differently (the
// cache state emulated below is only an approximation): bert_small's FFN down-projection
// measured oneDNN's matmul 10% faster than the packed GEMM in its trial and ran ~50% slower in
// the network. The rules were set by measuring whole networks, so a candidate other than
// theirs must be faster by this much to be chosen; then exhaustive_tune is never worse than
// the rules by more than a trial's error, and keeps the gains that are large.
constexpr double rule_margin = 0.10;

// The caches as a whole network leaves them for a layer: its weights were last used an
// inference ago, so they have left the cores' L2, while its activations were just written
// by the layer before and are in L2, as are the result and scratch buffers, which the arena
// reuses all the time. A trial run back to back finds everything hot, which favours kernels
// that reread their weights: bert_small's K = 1024 product measured oneDNN 15% faster than
// the packed GEMM hot and ran 50% slower in the network. Before each timed run the tuner
// evicts the L2 (each thread reads twice its size) and rereads every buffer but the
// constants. (Evicting the L3 as well, for programs whose constants exceed it, made
// ResNet-50's trials prefer conv_gemm for 1x1 layers where oneDNN ran faster in the
// network: the weights do not arrive cold from memory there.)
class cache_state {
public:
    explicit cache_state(std::size_t threads) : threads_(std::max<std::size_t>(threads, 1)) {
        const long l2 = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
        evict_.assign(2 * (l2 > 0 ? static_cast<std::size_t>(l2) : std::size_t{1} << 20) * threads_, 1);
    }

    void prepare(const std::vector<argument>& buffers) const {
        std::uint64_t sum = 0;
        touch(evict_.data(), evict_.size(), sum);
        for (const auto& a : buffers) touch(a.data(), a.get_shape().bytes(), sum);
        sink_ = sum;
    }

private:
    // Reads one byte per cache line of [p, p + n), split over the threads as the kernels are.
    void touch(const char* p, std::size_t n, std::uint64_t& total) const {
        std::uint64_t sum = 0;
        const auto lines = static_cast<std::int64_t>(n / 64);
#pragma omp parallel for schedule(static) num_threads(static_cast<int>(threads_)) reduction(+ : sum)
        for (std::int64_t i = 0; i < lines; ++i) sum += static_cast<unsigned char>(p[i * 64]);
        total += sum;
    }

    std::size_t threads_;
    std::vector<char> evict_;
    mutable volatile std::uint64_t sink_ = 0;
};

// One candidate lowered into its own module, ready to run.
class trial {
public:
    // `rules`: the candidate lowered as the rules would (only where they choose it, in the
    // form they choose: Winograd's tile), named "rules".
    trial(anchor_site& real, const anchor_candidate& c, bool rules = false)
        : name_(rules ? rules_choice : c.name), module_("tuning") {
        auto& env = real.env;
        anchor_plan plan = real.plan;
        lower_env scratch{module_, env.ctx, {}, {}, {}, {}, {}, {}};
        std::unordered_map<const instruction*, instruction_ref> made;
        for (auto& x : plan.operands) {
            if (auto it = made.find(&*x); it != made.end()) {
                x = it->second;
                continue;
            }
            instruction_ref y = x->is_literal() ? module_.add_literal(x->get_literal())
                                                : trial_operand(scratch, env, x,
                                                                may_write_into(env, x, real.pos, real.replaced));
            made.emplace(&*x, y);
            x = y;
        }
        // The kernel replaces this placeholder (a result of the anchor's shape).
        auto pos = module_.add_instruction(builtin::allocate{real.pos->get_shape()}, {});
        anchor_site site{scratch, plan, pos, {pos}};
        ok_ = c.lower(site, rules);
        if (!ok_) return;
        module_.add_return({pos});
        prepare(env.ctx);
    }

    // A candidate that lowers into the module itself (trial_candidate).
    trial(cpu_context& ctx, const trial_candidate& c) : name_(c.name), module_("tuning") {
        lower_env scratch{module_, ctx, {}, {}, {}, {}, {}, {}};
        ok_ = c.build(scratch);
        if (ok_) prepare(ctx);
    }

    bool ok() const { return ok_; }
    const std::string& name() const { return name_; }

    // One run of the kernels (and the reorders the candidate put before them), in ms, from
    // the cache state `caches` prepares (untimed).
    double run(context& ctx, const cache_state& caches) const {
        caches.prepare(buffers_);
        const auto start = std::chrono::steady_clock::now();
        for (const auto& s : steps_) s.ins->get_operator().compute(ctx, s.ins->get_shape(), s.args);
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    }

private:
    // The module's kernels finalized, its buffers made and every step's arguments.
    void prepare(cpu_context& ctx) {
        module_.finalize_ops(ctx);
        // Buffers made once (random values: no zeros or denormals to shortcut), then every
        // step's arguments.
        std::mt19937 rng(7);
        std::uniform_real_distribution<float> dist(0.5f, 1.5f);
        std::unordered_map<const instruction*, argument> values;
        for (auto ins = module_.begin(); ins != module_.end(); ++ins) {
            if (ins->is_return()) continue;
            std::vector<argument> args;
            for (auto in : ins->inputs()) args.push_back(values.at(&*in));
            if (ins->is_literal()) {
                values[&*ins] = ins->get_literal().get_argument();
            } else if (ins->get_operator().any_cast<builtin::allocate>()) {
                argument a(ins->get_shape());
                auto* f = reinterpret_cast<float*>(a.data());
                for (std::size_t i = 0; i < ins->get_shape().bytes() / sizeof(float); ++i) f[i] = dist(rng);
                values[&*ins] = a;
                buffers_.push_back(a);
            } else if (ins->get_operator().any_cast<tuning_input>()) {
                values[&*ins] = argument(ins->get_shape(), args.at(0).buffer());
            } else {
                const auto alias = ins->get_operator().output_alias(to_shapes(ins->inputs()));
                values[&*ins] = alias >= 0 ? argument(ins->get_shape(), args.at(static_cast<std::size_t>(alias)).buffer())
                                           : ins->get_operator().compute(ctx, ins->get_shape(), args);
                steps_.push_back({ins, std::move(args)});
            }
        }
    }

    struct step {
        instruction_ref ins;
        std::vector<argument> args;
    };
    std::string name_;
    module module_;
    bool ok_ = false;
    std::vector<step> steps_;
    std::vector<argument> buffers_;  // everything but the constants: operands, result, scratchpads
};

std::optional<tuning_record> measure(std::vector<std::unique_ptr<trial>>& trials, cpu_context& ctx,
                                     const std::string& preferred);

std::optional<tuning_record> measure(anchor_site& site) {
    const auto kind = anchor_kind(site.plan);
    std::vector<std::unique_ptr<trial>> trials;
    for (const auto& c : anchor_candidates()) {
        if (c.anchor != kind) continue;
        try {
            auto t = std::make_unique<trial>(site, c);
            if (t->ok()) trials.push_back(std::move(t));
        } catch (const std::exception&) {
            // A candidate that cannot build its kernel for this problem is no candidate.
        }
    }
    if (trials.size() < 2) return std::nullopt;
    // What the rules would run, measured beside the candidates: the yardstick a choice must
    // beat by rule_margin.
    for (const auto& c : anchor_candidates()) {
        if (c.anchor != kind) continue;
        try {
            auto t = std::make_unique<trial>(site, c, true);
            if (t->ok()) {
                trials.push_back(std::move(t));
                break;
            }
        } catch (const std::exception&) {
        }
    }
    return measure(trials, site.env.ctx, rules_choice);
}

std::optional<tuning_record> measure(std::vector<std::unique_ptr<trial>>& trials, cpu_context& ctx,
                                     const std::string& preferred) {
    if (trials.size() < 2) return std::nullopt;
    const cache_state caches(ctx.threads());
    std::vector<double> best(trials.size(), std::numeric_limits<double>::infinity());
    for (int r = 0; r < warm_up_runs; ++r)
        for (const auto& t : trials) t->run(ctx, caches);
    double spent = 0;
    for (int r = 0; r < max_rounds && (r < min_rounds || spent < round_budget_ms); ++r)
        for (std::size_t i = 0; i < trials.size(); ++i) {
            const double ms = trials[i]->run(ctx, caches);
            best[i] = std::min(best[i], ms);
            spent += ms;
        }
    tuning_record rec;
    std::size_t win = 0;
    for (std::size_t i = 0; i < trials.size(); ++i) {
        rec.ms.emplace_back(trials[i]->name(), best[i]);
        if (best[i] < best[win]) win = i;
    }
    rec.chosen = trials[win]->name();
    for (std::size_t i = 0; i < trials.size(); ++i)
        if (!preferred.empty() && trials[i]->name() == preferred && best[i] <= best[win] * (1 + rule_margin))
            rec.chosen = preferred;
    return rec;
}

}  // namespace

instruction_ref trial_operand(lower_env& scratch, const lower_env& real, instruction_ref x, bool owns) {
    const auto lay = real.layout.find(&*x);
    const std::size_t bytes = lay != real.layout.end() ? lay->second.to_md().get_size() : x->get_shape().bytes();
    auto buf = scratch.m.add_instruction(builtin::allocate{shape(type::uint8, {std::max<std::size_t>(bytes, 1)})}, {});
    auto y = scratch.m.add_instruction(tuning_input{x->get_shape(), owns}, {buf});
    if (lay != real.layout.end()) scratch.layout[&*y] = lay->second;
    return y;
}

std::optional<tuning_record> measure_candidates(cpu_context& ctx, const std::vector<trial_candidate>& candidates,
                                                const std::string& preferred) {
    std::vector<std::unique_ptr<trial>> trials;
    for (const auto& c : candidates) {
        try {
            auto t = std::make_unique<trial>(ctx, c);
            if (t->ok()) trials.push_back(std::move(t));
        } catch (const std::exception&) {
            // As for anchors: no candidate for this problem.
        }
    }
    return measure(trials, ctx, preferred);
}

std::string tuning_machine_key(const cpu_context& ctx) {
    return cpu_model() + "|" + codegen::host_isa() + (has_avx512() ? "" : " no-avx512") + "|" +
           std::to_string(ctx.threads());
}

std::string tuning_key(const anchor_site& site) {
    const auto& env = site.env;
    // The anchor's candidate names are part of the key: a record made before a candidate was
    // added (or renamed) is measured again instead of never meeting the new one.
    const auto kind = anchor_kind(site.plan);
    std::string names;
    for (const auto& c : anchor_candidates())
        if (c.anchor == kind) names += (names.empty() ? "" : ",") + std::string(c.name);
    std::string key = tuning_machine_key(env.ctx) + "|" + kind + "[" + names + "]|" +
                      site.plan.op.to_string() + "|";
    for (auto x : site.plan.operands) {
        key += x->get_shape().to_string();
        if (auto it = env.layout.find(&*x); it != env.layout.end()) key += " in " + to_value(it->second).to_string();
        key += x->is_literal() ? " const;" : ";";
    }
    return key + "|" + site.plan.dst.to_string();
}

std::string tuning_note(const tuning_record& r) {
    auto ms = [](double v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.3g", v);
        return std::string(buf);
    };
    std::string chosen, others;
    for (const auto& [name, v] : r.ms) {
        if (name == r.chosen) chosen = r.chosen + " " + ms(v) + " ms";
        else others += (others.empty() ? "" : ", ") + name + " " + ms(v);
    }
    if (chosen.empty()) chosen = r.chosen;
    return "tuned: " + chosen + (others.empty() ? "" : " (" + others + ")");
}

std::optional<tuning_record> tuned_choice(anchor_site& site) {
    auto& table = site.env.ctx.tuning();
    const auto key = tuning_key(site);
    if (auto r = table.find(key)) return r;
    auto r = measure(site);
    if (r) table.record(key, *r);
    return r;
}

}  // namespace kiln::cpu
