// The policy worker's confinement (engine/script/worker_confinement.hpp), tried from a
// child process that confines itself as the worker does and then attempts what a
// policy that escaped the Lua sandbox would: run a program, start a process, open a
// socket, write or delete a file, signal another process, map more than its
// address-space limit. Reading files must still work (the policy and the tandem
// library are read after confinement).
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <string>

#include "engine/script/worker_confinement.hpp"

BOOST_AUTO_TEST_SUITE(test_worker_confinement)  // ctest's unit.test_worker_confinement (tests/CMakeLists.txt)

using namespace tandem;

namespace {

// Each check is one bit of the child's exit status: 0 means every attempt failed as
// it should. The confinement's own description comes back through a pipe.
enum Bit { kExec = 1, kFork = 2, kSocket = 4, kWrite = 8, kUnlink = 16, kSignal = 32, kRead = 64, kMap = 128 };

int try_everything(bool seccomp, const std::string& scratch) {
  int bad = 0;
  if (seccomp) {
    // A path that does not exist: the filter refuses before the lookup (EPERM);
    // unconfined, the lookup fails (ENOENT) and this process is not replaced.
    char* argv[] = {const_cast<char*>("/nonexistent/tandem-probe"), nullptr};
    if (::execv(argv[0], argv) == 0 || errno != EPERM) bad |= kExec;
    const pid_t p = ::fork();
    if (p == 0) ::_exit(0);
    if (p >= 0 || errno != EPERM) bad |= kFork;
    if (::socket(AF_INET, SOCK_STREAM, 0) >= 0 || errno != EPERM) bad |= kSocket;
    if (::open((scratch + "/written").c_str(), O_WRONLY | O_CREAT, 0600) >= 0) bad |= kWrite;
    if (::open((scratch + "/existing").c_str(), O_RDWR) >= 0) bad |= kWrite;
    if (::unlink((scratch + "/existing").c_str()) == 0) bad |= kUnlink;
    if (::kill(::getppid(), 0) == 0) bad |= kSignal;
  }
  const int fd = ::open((scratch + "/existing").c_str(), O_RDONLY);
  if (fd < 0) bad |= kRead;
  else ::close(fd);
  // Far past the limit (the cap asked for is 64 MB).
  void* p = ::mmap(nullptr, size_t{4} << 30, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p != MAP_FAILED) bad |= kMap;
  return bad;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_confined_worker_cannot_reach_the_machine) {
  char tmpl[] = "/tmp/tandem-confinement-XXXXXX";
  const std::string scratch = ::mkdtemp(tmpl);
  std::FILE* f = std::fopen((scratch + "/existing").c_str(), "w");
  std::fputs("data", f);
  std::fclose(f);
  int pipe_fds[2];
  BOOST_REQUIRE(::pipe(pipe_fds) == 0);
  const pid_t child = ::fork();
  BOOST_REQUIRE(child >= 0);
  if (child == 0) {
    ::close(pipe_fds[0]);
    const std::string applied = confine_policy_worker(64.0);
    (void)!::write(pipe_fds[1], applied.data(), applied.size());
    ::close(pipe_fds[1]);
    ::_exit(try_everything(applied.find("seccomp unavailable") == std::string::npos, scratch));
  }
  ::close(pipe_fds[1]);
  char buf[512] = {};
  (void)!::read(pipe_fds[0], buf, sizeof buf - 1);
  ::close(pipe_fds[0]);
  int status = 0;
  BOOST_REQUIRE(::waitpid(child, &status, 0) == child);
  const std::string applied = buf;
  BOOST_TEST_MESSAGE("confinement: " << applied);
  BOOST_REQUIRE_MESSAGE(WIFEXITED(status), "the confined child died instead of reporting: status " << status);
  const int bad = WEXITSTATUS(status);
  BOOST_TEST((bad & kExec) == 0, "a confined worker ran a program");
  BOOST_TEST((bad & kFork) == 0, "a confined worker started a process");
  BOOST_TEST((bad & kSocket) == 0, "a confined worker opened a socket");
  BOOST_TEST((bad & kWrite) == 0, "a confined worker opened a file for writing");
  BOOST_TEST((bad & kUnlink) == 0, "a confined worker deleted a file");
  BOOST_TEST((bad & kSignal) == 0, "a confined worker signalled its parent");
  BOOST_TEST((bad & kRead) == 0, "a confined worker could not read a file");
  BOOST_TEST((bad & kMap) == 0, "a confined worker mapped 4 GB past its address-space limit");
  BOOST_TEST(!std::ifstream(scratch + "/written").good());
  if (applied.find("seccomp unavailable") != std::string::npos)
    BOOST_TEST_MESSAGE("NOTE: no seccomp here (" << applied << "): only the resource limits were checked");
  std::remove((scratch + "/existing").c_str());
  ::rmdir(scratch.c_str());
}

BOOST_AUTO_TEST_SUITE_END()  // test_worker_confinement
