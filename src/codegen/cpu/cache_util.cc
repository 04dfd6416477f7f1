#include "codegen/cpu/cache_util.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <array>

#include "gaf/status.h"

namespace gaf::codegen {

std::string sha256_hex(const void* data, size_t n) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned len = 0;
  GAF_CHECK(EVP_Digest(data, n, md.data(), &len, EVP_sha256(), nullptr) == 1, "SHA-256 failed (OpenSSL)");
  std::string hex;
  for (unsigned i = 0; i < len; ++i) hex += fmt::format("{:02x}", md[i]);
  return hex;
}

std::string untrusted_file_reason(const struct stat& st) {
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  if (st.st_uid != geteuid()) return "owned by another user";
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return "writable by other users";
  return "";
}

}  // namespace gaf::codegen
