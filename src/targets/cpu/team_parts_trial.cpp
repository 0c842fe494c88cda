#include "targets/cpu/team_parts_trial.hpp"

#include <algorithm>
#include <cstdio>

namespace kiln::cpu {

namespace {

constexpr std::array<const char*, team_parts_trial::all_ways> way_names = {"without a team", "spread over the team",
                                                                           "on the calling thread", "on a worker"};
constexpr std::array<const char*, team_parts_trial::all_ways> choice_names = {
    "an OpenMP region per kernel", "parts spread over the team", "parts on the calling thread", "parts on a worker"};

std::size_t index_of(eval_way way) { return static_cast<std::size_t>(way); }

double median_of(std::array<double, team_parts_trial::trial_evals> s, std::size_t n) {
    std::nth_element(s.begin(), s.begin() + n / 2, s.begin() + n);
    return s[n / 2];
}

}  // namespace

team_parts_trial::team_parts_trial(bool with_no_team)
    : first_(with_no_team ? 0 : 1), choice_(static_cast<eval_way>(first_)), last_(choice_) {}

bool team_parts_trial::done(std::size_t i) const { return dropped_[i] || counts_[i] >= trial_evals; }

eval_way team_parts_trial::next() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (phase_ != phase::trial) return choice_;
    // Blocks of each way in turn, skipping a way that is done (evals may overlap, so the
    // counts can run ahead of what was handed out).
    const std::size_t ways = all_ways - first_;
    for (std::size_t tries = 0; tries < ways * block; ++tries) {
        const std::size_t i = first_ + (handed_++ / block) % ways;
        if (!done(i)) return static_cast<eval_way>(i);
    }
    return choice_;
}

void team_parts_trial::maybe_drop(std::size_t i) {
    if (counts_[i] < block - 1) return;
    const auto& own = samples_[i];
    const double fastest_here = *std::min_element(own.begin(), own.begin() + static_cast<std::ptrdiff_t>(counts_[i]));
    for (std::size_t k = first_; k < all_ways; ++k) {
        if (k == i || counts_[k] == 0) continue;
        const double fastest_there =
            *std::min_element(samples_[k].begin(), samples_[k].begin() + static_cast<std::ptrdiff_t>(counts_[k]));
        if (fastest_here > drop_ratio * fastest_there) {
            dropped_[i] = true;
            return;
        }
    }
}

bool team_parts_trial::clearly_slower(std::size_t i, double seconds) const {
    for (std::size_t k = first_; k < all_ways; ++k) {
        if (k == i || counts_[k] == 0) continue;
        const double fastest_there =
            *std::min_element(samples_[k].begin(), samples_[k].begin() + static_cast<std::ptrdiff_t>(counts_[k]));
        if (seconds > drop_ratio * fastest_there + preemption_s) return true;
    }
    return false;
}

void team_parts_trial::decide() {
    std::size_t best = all_ways;
    bool others_dropped = true;
    for (std::size_t k = first_; k < all_ways; ++k) {
        medians_[k] = counts_[k] ? median_of(samples_[k], counts_[k]) : 0;
        if (dropped_[k]) continue;
        if (best == all_ways || medians_[k] < medians_[best]) best = k;
    }
    for (std::size_t k = first_; k < all_ways; ++k)
        if (k != best && !dropped_[k]) others_dropped = false;
    const auto won = static_cast<eval_way>(best);
    if (won != choice_)
        period_ = min_period;
    else
        period_ = others_dropped ? max_period : std::min(period_ * 2, max_period);
    choice_ = won;
    measured_ = true;
    phase_ = phase::settled;
    left_ = period_;
}

void team_parts_trial::record(eval_way way, double seconds) {
    std::lock_guard<std::mutex> lock(mutex_);
    // The first eval after another way: the buffers moved cores.
    const bool moved = way != last_;
    last_ = way;
    if (phase_ != phase::trial) {
        if (left_ > 0) --left_;
        if (left_ == 0) {
            phase_ = phase::trial;
            counts_ = {};
            dropped_ = {};
            handed_ = 0;
        }
        return;
    }
    const std::size_t i = index_of(way);
    if (i < first_ || done(i)) return;
    if (clearly_slower(i, seconds)) {
        samples_[i][counts_[i]++] = seconds;  // for the note's figure
        dropped_[i] = true;
    } else if (!moved) {
        samples_[i][counts_[i]++] = seconds;
        if (counts_[i] % (block - 1) == 0) maybe_drop(i);
    }
    // Done when every way is, or when one is left (nothing to compare it with).
    std::size_t left = 0, last_left = all_ways;
    for (std::size_t k = first_; k < all_ways; ++k)
        if (!dropped_[k]) ++left, last_left = k;
    if (left == 1 && counts_[last_left] > 0) {
        decide();
        return;
    }
    for (std::size_t k = first_; k < all_ways; ++k)
        if (!done(k)) return;
    decide();
}

bool team_parts_trial::in_trial() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return phase_ == phase::trial;
}

bool team_parts_trial::measured() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return measured_;
}

std::string team_parts_trial::note() const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!measured_) return {};
    std::string s = std::string(choice_names[index_of(choice_)]) + " (measured:";
    for (std::size_t k = first_; k < all_ways; ++k) {
        char buf[80];
        std::snprintf(buf, sizeof buf, "%s %.3f ms %s%s", k > first_ ? "," : "", medians_[k] * 1e3, way_names[k],
                      dropped_[k] ? " (dropped)" : "");
        s += buf;
    }
    return s + ")";
}

}  // namespace kiln::cpu
