#include "bindings/call_deadline.hpp"

namespace tandem {

namespace {
thread_local CallDeadline* t_deadline = nullptr;
}  // namespace

bool call_deadline_passed(double now) { return t_deadline != nullptr && t_deadline->check(now) != CallDeadline::none; }

CallDeadlineScope::CallDeadlineScope(CallDeadline* deadline) : enclosing_(t_deadline) { t_deadline = deadline; }

CallDeadlineScope::~CallDeadlineScope() { t_deadline = enclosing_; }

}  // namespace tandem
