// tandem-policy-worker: the process a policy runs in (engine/script/policy_worker.hpp).
// Started by tandem itself (policy_process.cpp) with its socket as file descriptor 3
// and the shared stats region as 4;
// not meant to be run by hand.
#include <fcntl.h>

#include <cstdio>
#include <cstring>

#include "engine/script/policy_worker.hpp"

int main(int argc, char** argv) {
  if (argc != 2 || std::strcmp(argv[1], "--serve-fd-3") != 0) {
    std::fprintf(stderr, "tandem-policy-worker: started by tandem to run a policy; not meant to be run by hand\n");
    return 2;
  }
  // fd 4: the shared stats region, when the host made one.
  tandem::run_policy_worker(3, ::fcntl(4, F_GETFD) >= 0 ? 4 : -1);
}
