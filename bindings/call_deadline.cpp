#include "bindings/call_deadline.hpp"

#include <cmath>

namespace tandem {

namespace {
thread_local double t_deadline_ms = HUGE_VAL;
}  // namespace

double call_deadline_ms() { return t_deadline_ms; }

CallDeadlineScope::CallDeadlineScope(double deadline_ms) : enclosing_ms_(t_deadline_ms) {
  t_deadline_ms = deadline_ms;
}

CallDeadlineScope::~CallDeadlineScope() { t_deadline_ms = enclosing_ms_; }

}  // namespace tandem
