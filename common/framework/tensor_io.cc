#include "common/framework/tensor_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "proto/framework.pb.h"

namespace oar {

namespace {
constexpr uint64_t kMaxBytes = uint64_t{1} << 40;  // sanity bound on sizes read from a file
}  // namespace

void WriteTensorHeader(DataType dtype, const DDim& dims, std::ostream& out) {
  Put<uint32_t>(out, 0);
  paddle::framework::proto::VarType::TensorDesc desc;
  desc.set_data_type(static_cast<paddle::framework::proto::VarType::Type>(dtype));
  for (int64_t d : dims) desc.add_dims(d);
  const std::string bytes = desc.SerializeAsString();
  Put<int32_t>(out, static_cast<int32_t>(bytes.size()));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

absl::Status ReadTensorHeader(std::istream& in, const std::string& what, const char* record, DataType* dtype,
                              DDim* dims) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": not a ", record, " record (", why, ")"));
  };
  uint32_t tversion;
  int32_t desc_size;
  if (!Get(in, &tversion) || tversion != 0) return bad("bad tensor version");
  if (!Get(in, &desc_size) || desc_size < 0 || desc_size > (1 << 20)) return bad("bad tensor descriptor size");
  std::string bytes(static_cast<size_t>(desc_size), '\0');
  if (!in.read(bytes.data(), desc_size)) return bad("truncated tensor descriptor");
  paddle::framework::proto::VarType::TensorDesc desc;
  if (!desc.ParseFromString(bytes) || !IsElementType(desc.data_type())) return bad("malformed tensor descriptor");
  *dims = DDim(std::vector<int64_t>(desc.dims().begin(), desc.dims().end()));
  *dtype = static_cast<DataType>(desc.data_type());
  if (dims->numel() < 0 || static_cast<uint64_t>(dims->numel()) * SizeOf(*dtype) > kMaxBytes) {
    return bad(absl::StrCat("bad dims ", dims->ToString()));
  }
  return absl::OkStatus();
}

absl::Status WriteLoDTensor(const Tensor& t, std::ostream& out) {
  if (!t.initialized()) return absl::InvalidArgumentError("cannot save an uninitialized tensor");
  Put<uint32_t>(out, 0);
  Put<uint64_t>(out, t.lod().size());
  for (const auto& level : t.lod()) {
    Put<uint64_t>(out, level.size() * sizeof(size_t));
    out.write(reinterpret_cast<const char*>(level.data()), static_cast<std::streamsize>(level.size() * sizeof(size_t)));
  }
  WriteTensorHeader(t.dtype(), t.dims(), out);
  out.write(static_cast<const char*>(t.raw_data()), static_cast<std::streamsize>(t.nbytes()));
  if (!out) return absl::DataLossError("write failed");
  return absl::OkStatus();
}

absl::Status ReadLoDTensor(std::istream& in, const std::string& what, Tensor* t) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": not a LoDTensor record (", why, ")"));
  };
  uint32_t version;
  if (!Get(in, &version)) return bad("truncated before its version");
  if (version != 0) return bad(absl::StrCat("unsupported version ", version));
  uint64_t levels;
  if (!Get(in, &levels) || levels > 16) return bad("bad LoD level count");
  LoD lod(levels);
  for (auto& level : lod) {
    uint64_t size;
    if (!Get(in, &size) || size % sizeof(size_t) != 0 || size > kMaxBytes) return bad("bad LoD size");
    level.resize(size / sizeof(size_t));
    if (!in.read(reinterpret_cast<char*>(level.data()), static_cast<std::streamsize>(size)))
      return bad("truncated LoD");
  }
  DataType dtype;
  DDim dims;
  OAR_RETURN_IF_ERROR(ReadTensorHeader(in, what, "LoDTensor", &dtype, &dims));
  t->Resize(dims);
  void* data = t->mutable_data(dtype);
  if (!in.read(static_cast<char*>(data), static_cast<std::streamsize>(t->nbytes()))) return bad("truncated data");
  t->set_lod(lod);
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& bytes) {
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return absl::PermissionDeniedError(absl::StrCat("cannot create ", tmp, ": ", std::strerror(errno)));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::string err = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return absl::DataLossError(absl::StrCat("write ", tmp, ": ", err));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return absl::DataLossError(absl::StrCat("fsync ", tmp, ": ", std::strerror(errno)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return absl::DataLossError(absl::StrCat("rename ", tmp, " -> ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace oar
