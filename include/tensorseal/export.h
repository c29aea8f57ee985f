// tensorseal/export.h — which symbols the shared library exports.
//
// The library is compiled with hidden visibility (CMakeLists.txt): only declarations
// between TENSORSEAL_API_BEGIN and TENSORSEAL_API_END, which every public header puts
// around its namespace, are exported. Internals (src/, tensorseal::detail) are not;
// tests and fuzzers link the internal archive instead.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define TENSORSEAL_API_BEGIN _Pragma("GCC visibility push(default)")
#define TENSORSEAL_API_END _Pragma("GCC visibility pop")
#else
#define TENSORSEAL_API_BEGIN
#define TENSORSEAL_API_END
#endif
