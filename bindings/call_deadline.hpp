#pragma once
// The deadline of the budgeted Lua call running on this thread, for the C functions
// that call can reach and that may run long (lp_solve's solve): a budget's count hook
// cannot interrupt C code, so such a function stops at this deadline by itself.
//
// It lives here, not with the budget (engine/script/budget.hpp), so that the bindings
// need nothing of the script host: the host sets the deadline, the bindings read it.
// One slot per thread: a thread runs one budgeted call at a time (a call that starts
// inside another restores the outer deadline when it ends).
namespace tandem {

// now_ms()'s clock; +inf outside a budgeted call.
double call_deadline_ms();

// Publishes deadline_ms as this thread's call deadline for the scope's lifetime.
class CallDeadlineScope {
public:
  explicit CallDeadlineScope(double deadline_ms);
  ~CallDeadlineScope();
  CallDeadlineScope(const CallDeadlineScope&) = delete;
  CallDeadlineScope& operator=(const CallDeadlineScope&) = delete;

private:
  double enclosing_ms_;
};

}  // namespace tandem
