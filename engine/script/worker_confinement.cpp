#include "engine/script/worker_confinement.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>

#if TANDEM_HAVE_SECCOMP
#include <seccomp.h>
// libseccomp's SCMP_A0..A5 leave the comparison's second datum to zero, which
// clang's -Wextra reports at every use; popped at the end of this file (a unity
// batch compiles the files after it in the same translation unit).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#endif

namespace tandem {

namespace {

// The process's mapped size now, in bytes (/proc/self/statm's first field), or 0.
size_t mapped_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long pages = 0;
  const int n = std::fscanf(f, "%lu", &pages);
  std::fclose(f);
  return n == 1 ? pages * static_cast<size_t>(::sysconf(_SC_PAGESIZE)) : 0;
}

void set_limit(int resource, rlim_t value) {
  rlimit r{value, value};
  ::setrlimit(resource, &r);
}

#if TANDEM_HAVE_SECCOMP
// The filter: everything the worker needs stays allowed (reading files, memory,
// its socket); the rest of what a process could do to the machine fails with EPERM.
std::string install_seccomp() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx) return "seccomp unavailable (seccomp_init failed)";
  const uint32_t deny = SCMP_ACT_ERRNO(EPERM);
  int rc = 0;
  for (int sc : {SCMP_SYS(execve), SCMP_SYS(execveat), SCMP_SYS(fork), SCMP_SYS(vfork), SCMP_SYS(clone),
                 SCMP_SYS(clone3), SCMP_SYS(socket), SCMP_SYS(socketpair), SCMP_SYS(connect), SCMP_SYS(bind),
                 SCMP_SYS(listen), SCMP_SYS(accept), SCMP_SYS(accept4), SCMP_SYS(creat), SCMP_SYS(openat2),
                 SCMP_SYS(unlink), SCMP_SYS(unlinkat), SCMP_SYS(rename), SCMP_SYS(renameat), SCMP_SYS(renameat2),
                 SCMP_SYS(mkdir), SCMP_SYS(mkdirat), SCMP_SYS(rmdir), SCMP_SYS(link), SCMP_SYS(linkat),
                 SCMP_SYS(symlink), SCMP_SYS(symlinkat), SCMP_SYS(chmod), SCMP_SYS(fchmod), SCMP_SYS(fchmodat),
                 SCMP_SYS(chown), SCMP_SYS(fchown), SCMP_SYS(lchown), SCMP_SYS(fchownat), SCMP_SYS(truncate),
                 SCMP_SYS(ftruncate), SCMP_SYS(mknod), SCMP_SYS(mknodat), SCMP_SYS(ptrace),
                 SCMP_SYS(process_vm_readv), SCMP_SYS(process_vm_writev), SCMP_SYS(mount), SCMP_SYS(umount2),
                 SCMP_SYS(chroot), SCMP_SYS(pivot_root), SCMP_SYS(unshare), SCMP_SYS(setns), SCMP_SYS(bpf),
                 SCMP_SYS(perf_event_open), SCMP_SYS(keyctl), SCMP_SYS(add_key), SCMP_SYS(request_key),
                 SCMP_SYS(personality), SCMP_SYS(io_uring_setup)})
    rc |= seccomp_rule_add(ctx, deny, sc, 0);
  // open/openat for writing, creating or truncating: the access mode and O_CREAT/O_TRUNC
  // bits, each its own rule (a rule's comparisons are ANDed; rules are ORed).
  for (unsigned flag : {unsigned(O_WRONLY), unsigned(O_RDWR), unsigned(O_CREAT), unsigned(O_TRUNC)}) {
    rc |= seccomp_rule_add(ctx, deny, SCMP_SYS(open), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, flag, flag));
    rc |= seccomp_rule_add(ctx, deny, SCMP_SYS(openat), 1, SCMP_A2(SCMP_CMP_MASKED_EQ, flag, flag));
  }
  // Signals only to itself (abort() raises SIGABRT through tgkill).
  const pid_t self = ::getpid();
  rc |= seccomp_rule_add(ctx, deny, SCMP_SYS(kill), 1, SCMP_A0(SCMP_CMP_NE, static_cast<scmp_datum_t>(self)));
  rc |= seccomp_rule_add(ctx, deny, SCMP_SYS(tgkill), 1, SCMP_A0(SCMP_CMP_NE, static_cast<scmp_datum_t>(self)));
  if (rc != 0) {
    seccomp_release(ctx);
    return "seccomp unavailable (a rule was refused: " + std::string(std::strerror(-rc)) + ")";
  }
  rc = seccomp_load(ctx);
  seccomp_release(ctx);
  if (rc != 0) return "seccomp unavailable (the kernel refused the filter: " + std::string(std::strerror(-rc)) + ")";
  return "seccomp";
}
#else
std::string install_seccomp() { return "seccomp unavailable (built without libseccomp-dev)"; }
#endif

}  // namespace

std::string confine_policy_worker(double memory_mb) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() == 1) ::_exit(0);  // the parent is already gone
  set_limit(RLIMIT_CORE, 0);
  set_limit(RLIMIT_NOFILE, 64);
  // The Lua state is capped at memory_mb by its allocator; the address space adds
  // room for what C code maps beside it (lp_solve's work arrays, the C stack) and
  // stops anything that bypasses the allocator.
  const size_t room = static_cast<size_t>((2.0 * memory_mb + 512.0) * 1024.0 * 1024.0);
  const size_t now = mapped_bytes();
  std::string applied = "address space " + std::to_string((now + room) >> 20) + " MB, no core files";
  if (now > 0) set_limit(RLIMIT_AS, now + room);
  return applied + ", " + install_seccomp();
}

void arm_cpu_limit(double seconds) {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  const double used = static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
                      1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  const rlim_t soft = static_cast<rlim_t>(std::ceil(used + std::min(seconds, 1e6))) + 1;
  rlimit r{soft, RLIM_INFINITY};
  ::setrlimit(RLIMIT_CPU, &r);
}

}  // namespace tandem

#if TANDEM_HAVE_SECCOMP
#pragma GCC diagnostic pop  // pushed before seccomp.h
#endif
