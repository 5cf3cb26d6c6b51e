#pragma once
// Ctrl-C ends the run at the next iteration boundary with a summary written; a
// second Ctrl-C kills it as usual.
namespace tandem {

// Installs the handler for the guard's life.
class InterruptGuard {
public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
};

// Whether Ctrl-C was pressed since the guard was installed.
bool interrupted();

}  // namespace tandem
