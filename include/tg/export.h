/* tgraph — TG_API marks the functions libtgraph exports. The library is built with hidden
 * visibility: a program linked against libtgraph.so reaches what the public headers declare with
 * TG_API and nothing else (internal functions, kernels and test hooks stay inside;
 * tests/test_exports.sh checks both ways). */
#ifndef TG_EXPORT_H
#define TG_EXPORT_H

#if defined(__GNUC__)
#define TG_API __attribute__((visibility("default")))
#else
#define TG_API
#endif

#endif
