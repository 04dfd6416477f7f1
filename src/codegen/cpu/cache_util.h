// Helpers of the kernel caches (the CPU's shared objects, the CUDA backend's CUBINs): content hashes and the
// ownership rules a cached file must meet before anything of it is loaded.
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <string>

namespace gaf::codegen {

std::string sha256_hex(const void* data, size_t n);

// "" when a cached file with status `st` may be trusted: a regular file, owned by this user, writable by
// nobody else; else what is wrong with it.
std::string untrusted_file_reason(const struct stat& st);

}  // namespace gaf::codegen
