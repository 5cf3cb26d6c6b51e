#pragma once
// Inflated copies of gzip-compressed data files, kept between runs. Debian ships
// Fashion-MNIST gzip-compressed, and inflating its 47 MB of training images cost
// about 0.4 CPU-seconds in every rank of every run (more than the rest of a short
// run's start). The first reader leaves the inflated bytes in a cache file; later
// readers map that file, so the ranks of a job share one copy in the page cache.
//
// Where: $TANDEM_CACHE_DIR, else $XDG_CACHE_HOME/tandem, else $HOME/.cache/tandem
// (TANDEM_CACHE_DIR=off turns the cache off). A cache file is named after the source
// file's path, size, inode and times, so a changed source is inflated again; it is
// written under a temporary name and linked in place whole, so a reader never sees
// half of one. Any failure to read or write the cache only costs the inflation.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace tandem {

// Bytes that stay valid while `owner` lives (a mapping of a cache file, or a buffer).
struct SharedBytes {
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::shared_ptr<const void> owner;
};

// The cache's folder, or "" where it is off or no folder can be named.
std::string inflated_cache_dir();

// gz_path's entry as the file is now (its path, size, inode, modification and change
// times in the name), or "" where the cache is off or the source cannot be looked at.
// Taken before the source is read, so that a source replaced while it is inflated
// never leaves its old bytes under the new file's name.
std::string inflated_entry(const std::string& gz_path);

// The entry, mapped read-only; an empty SharedBytes (owner null) where there is none.
SharedBytes map_inflated(const std::string& entry);

// Publishes `bytes` (the whole inflated source) as the entry where they are 1 MiB or
// more: written to a temporary file of a unique name, flushed to disk, then linked in
// place, never over an entry another rank may have mapped. Copies of the same source
// from before it changed, and temporary files a crash left, are removed. Errors are
// ignored.
void store_inflated(const std::string& entry, const uint8_t* bytes, size_t size);

// Removes an entry that did not parse, so that the next reader writes it again.
void drop_inflated(const std::string& entry);

}  // namespace tandem
