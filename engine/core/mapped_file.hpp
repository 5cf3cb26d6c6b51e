#pragma once
// A regular file mapped read-only, whole: its pages are read when touched, so a file
// of any size opens in a few system calls and no resident memory. The descriptor
// closes once the file is mapped (a thousand mapped files hold no thousand
// descriptors); the mapping ends with the object, however a reader's checks end.
// Token shards (engine/data/token_files.hpp) and init_from's safetensors files
// (engine/train/checkpoint/init_from.hpp) are read through it.
#include <cstdint>
#include <string>

namespace tandem {

class MappedFile {
public:
  // `what` names the file in errors ("token file '/x/train.bin'"), `hint` says what
  // to point the setting at when the path is not a regular file. An empty file maps
  // nothing: data() is null, size() 0. random_access: no read-ahead (windows drawn
  // at random would fetch pages no one asked for).
  MappedFile(const std::string& path, const std::string& what, const std::string& hint, bool random_access = false);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  int64_t size() const { return size_; }

private:
  const uint8_t* data_ = nullptr;
  int64_t size_ = 0;
};

}  // namespace tandem
