#include "core/buffer_recycler.hpp"

namespace kiln::detail {

namespace {
thread_local buffer_recycler* active = nullptr;
thread_local std::size_t fresh = 0;
}  // namespace

std::shared_ptr<char> buffer_recycler::take(std::size_t bytes) {
    // The smallest free buffer that fits. use_count 1: only this recycler holds it (the
    // step that had it, and any caller it was returned to, let it go); no other thread
    // can copy it meanwhile.
    slot* best = nullptr;
    for (auto& s : slots_)
        if (s.buffer.use_count() == 1 && s.bytes >= bytes && (!best || s.bytes < best->bytes)) best = &s;
    return best ? best->buffer : nullptr;
}

void buffer_recycler::keep(const std::shared_ptr<char>& buffer, std::size_t bytes) {
    // Replaces the largest free buffer too small for it (growing the set in place), else
    // joins the set.
    slot* victim = nullptr;
    for (auto& s : slots_)
        if (s.buffer.use_count() == 1 && (!victim || s.bytes > victim->bytes)) victim = &s;
    if (victim) {
        *victim = slot{buffer, bytes};
        return;
    }
    if (slots_.size() < max_slots) slots_.push_back(slot{buffer, bytes});
}

std::unique_ptr<buffer_recycler> recycler_pool::acquire() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.empty()) return std::make_unique<buffer_recycler>();
    auto r = std::move(free_.back());
    free_.pop_back();
    return r;
}

void recycler_pool::release(std::unique_ptr<buffer_recycler> r) {
    if (!r) return;
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(std::move(r));
}

void recycler_pool::clear() {
    std::vector<std::unique_ptr<buffer_recycler>> dropped;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        dropped.swap(free_);
    }
    // Freed here, outside the lock.
}

recycling_scope::recycling_scope(buffer_recycler* r) : previous_(active) { active = r; }

recycling_scope::~recycling_scope() { active = previous_; }

buffer_recycler* active_recycler() { return active; }
std::size_t fresh_allocations() { return fresh; }
void count_fresh_allocation() { ++fresh; }

eval_thread_state::eval_thread_state()
    : owner_(std::this_thread::get_id()), recycler_(active), limit_(thread_allocation_limit()) {}

eval_thread_state::scope::scope(eval_thread_state& state)
    : state_(state), elsewhere_(std::this_thread::get_id() != state.owner_), fresh_before_(fresh),
      recycling_(state.recycler_) {
    if (elsewhere_) limit_ = std::make_unique<allocation_limit>(state.limit_);
}

eval_thread_state::scope::~scope() {
    if (elsewhere_) state_.fresh_elsewhere_.fetch_add(fresh - fresh_before_, std::memory_order_relaxed);
}

void eval_thread_state::settle() { fresh += fresh_elsewhere_.exchange(0, std::memory_order_relaxed); }

}  // namespace kiln::detail
