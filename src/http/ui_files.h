// The admin console's files (SPEC §9), built into the binary: the sources live in ui/, and
// cmake/embed_files.cmake turns them into a generated table at build time (no build step of
// their own, nothing fetched at run time). ui_handlers.h serves them.
#pragma once

#include <span>
#include <string_view>

namespace dcm::http {

struct EmbeddedFile {
  std::string_view path;          // relative to ui/, e.g. "index.html", "js/app.js"
  std::string_view content_type;  // from the extension, e.g. "text/javascript; charset=utf-8"
  std::string_view bytes;
};

// Every file of ui/, in the order CMake listed them. Static data: safe from any thread.
std::span<const EmbeddedFile> ConsoleFiles();

}  // namespace dcm::http
