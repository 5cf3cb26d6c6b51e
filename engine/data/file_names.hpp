#pragma once
// A data set's files as its messages name them: the first three, then their count
// (text_corpus.cpp, token_files.cpp).
#include <string>
#include <vector>

namespace tandem {

inline std::string describe_files(const std::vector<std::string>& files) {
  std::string out;
  for (size_t i = 0; i < files.size() && i < 3; ++i) out += (i ? ", " : "") + files[i];
  if (files.size() > 3) out += " and " + std::to_string(files.size() - 3) + " more";
  return out.empty() ? "no files" : out;
}

}  // namespace tandem
