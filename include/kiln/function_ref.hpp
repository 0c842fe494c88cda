// kiln::function_ref: a callable referred to without a copy, as C++26's std::function_ref.
// std::function allocates for a lambda capturing more than two pointers, every time one is
// built: on every eval (context::run_host) and every parallel part of a kernel (cpu::team).
// It lives only as long as the callable it refers to, so take it as a parameter, never
// store it.
#pragma once
#include <concepts>
#include <type_traits>
#include <utility>

namespace kiln {

template <class Signature>
class function_ref;

template <class R, class... Args>
class function_ref<R(Args...)> {
public:
    template <class F>
    requires(!std::same_as<std::remove_cvref_t<F>, function_ref> && std::is_invocable_r_v<R, const F&, Args...>)
        function_ref(const F& f)  // implicit: callers pass a lambda
        : callable_(&f), call_([](const void* c, Args... args) -> R {
              return (*static_cast<const F*>(c))(std::forward<Args>(args)...);
          }) {}

    R operator()(Args... args) const { return call_(callable_, std::forward<Args>(args)...); }

private:
    const void* callable_;
    R (*call_)(const void*, Args...);
};

}  // namespace kiln
