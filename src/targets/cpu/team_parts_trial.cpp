#include "targets/cpu/team_parts_trial.hpp"

#include <algorithm>
#include <cstdio>

namespace kiln::cpu {

namespace {

constexpr std::array<team::parts_on, team_parts_trial::ways> all_ways = {team::parts_on::team, team::parts_on::caller,
                                                                         team::parts_on::worker};
constexpr std::array<const char*, team_parts_trial::ways> way_names = {"spread over the team", "on the calling thread",
                                                                       "on a worker"};

std::size_t index_of(team::parts_on where) {
    return static_cast<std::size_t>(std::find(all_ways.begin(), all_ways.end(), where) - all_ways.begin());
}

}  // namespace

team::parts_on team_parts_trial::next() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (phase_ != phase::trial) return choice_;
    // Blocks of each way in turn, skipping a way that has its samples (evals may overlap,
    // so the counts can run ahead of what was handed out).
    for (std::size_t tries = 0; tries < ways * block; ++tries) {
        const auto where = all_ways[(handed_++ / block) % ways];
        if (counts_[index_of(where)] < trial_evals) return where;
    }
    return choice_;
}

void team_parts_trial::record(team::parts_on where, double seconds) {
    std::lock_guard<std::mutex> lock(mutex_);
    // The first eval after another way: the buffers moved cores.
    const bool moved = where != last_;
    last_ = where;
    if (phase_ != phase::trial) {
        if (left_ > 0) --left_;
        if (left_ == 0) {
            phase_ = phase::trial;
            counts_ = {};
            handed_ = 0;
        }
        return;
    }
    const std::size_t i = index_of(where);
    if (moved || counts_[i] >= trial_evals) return;
    samples_[i][counts_[i]++] = seconds;
    for (std::size_t k = 0; k < ways; ++k)
        if (counts_[k] < trial_evals) return;
    std::size_t best = 0;
    for (std::size_t k = 0; k < ways; ++k) {
        auto& s = samples_[k];
        std::nth_element(s.begin(), s.begin() + trial_evals / 2, s.end());
        medians_[k] = s[trial_evals / 2];
        if (medians_[k] < medians_[best]) best = k;
    }
    const team::parts_on won = all_ways[best];
    period_ = won == choice_ ? std::min(period_ * 2, max_period) : min_period;
    choice_ = won;
    phase_ = phase::settled;
    left_ = period_;
}

bool team_parts_trial::in_trial() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return phase_ == phase::trial;
}

std::string team_parts_trial::note() const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (medians_[0] == 0) return {};
    std::string s = std::string("parts ") + way_names[index_of(choice_)] + " (measured:";
    for (std::size_t k = 0; k < ways; ++k) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%s %.3f ms %s", k ? "," : "", medians_[k] * 1e3, way_names[k]);
        s += buf;
    }
    return s + ")";
}

}  // namespace kiln::cpu
