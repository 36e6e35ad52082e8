// glibc's allocator controls (malloc.h), which Swift's Glibc module does not export.
#ifndef GATEHOUSE_CMALLOC_SHIM_H
#define GATEHOUSE_CMALLOC_SHIM_H

#if __has_include(<malloc.h>)
#include <malloc.h>
#endif

#endif
