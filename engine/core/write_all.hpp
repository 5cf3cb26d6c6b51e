#pragma once
// write(2) until every byte is out: a write may take part of its buffer (a pipe, a
// full disk's last blocks) or be interrupted by a signal before anything is written.
// Each caller decides what a short count means (the checkpoint fails the run, the
// inflated cache drops its copy, the console's screen copy gives up quietly).
#include <cstddef>

namespace tandem {

// Writes size bytes of data to fd, again after EINTR. Returns how many were written:
// size, or fewer where a write failed (errno says why) or wrote nothing.
size_t write_all(int fd, const void* data, size_t size);

}  // namespace tandem
