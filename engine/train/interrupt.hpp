#pragma once
// Ctrl-C ends the run at the next iteration boundary with a summary written; a
// second Ctrl-C kills it as usual.
//
// With several ranks the terminal's Ctrl-C reaches only the launching tandem process:
// mpirun and the ranks run in a process group of their own, because mpirun aborts
// the whole job on SIGINT (cut-off traces, no summary). The launcher turns the first
// Ctrl-C into SIGUSR1 for mpirun, which forwards it to every rank; a rank takes
// SIGUSR1 as it takes SIGINT. Rank 0's flag decides (the stop travels in the
// iteration's Control), so every rank finishes the same iteration.
namespace tandem {

// Installs the handler (SIGINT and SIGUSR1) for the guard's life.
class InterruptGuard {
public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
};

// Whether Ctrl-C was pressed (or the launcher forwarded it) since the process
// started listening.
bool interrupted();

// The launcher: whether it forwarded any signal (Ctrl-C, SIGTERM, SIGHUP) to the job,
// which then must not be restarted (--elastic).
bool signalled();

// A rank of a job mpirun started: listen for the launcher's SIGUSR1 from the start,
// so one that arrives while the rank is still setting up stops it at its first
// boundary instead of killing it (SIGUSR1's default action).
void listen_for_forwarded_interrupt();

// The launcher, around the job it started through mpirun (pid `mpirun`, leading a
// process group of its own): the first SIGINT is forwarded as SIGUSR1 (the ranks
// stop after the current iteration), a second as SIGINT (mpirun aborts the job);
// SIGTERM and SIGHUP are forwarded as SIGTERM. forward_interrupts(0) stops.
void forward_interrupts(int mpirun);

}  // namespace tandem
