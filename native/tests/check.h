/* check.h: the assertion every C test in this folder uses. CHECK stops the test program at
 * the first failed condition (exit 1, with file, line and the condition); CHECK_RC checks a
 * call returned SC_OK. Tests that count failures and go on define their own macro. */
#ifndef SC_TESTS_CHECK_H
#define SC_TESTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(c)                                                                  \
    do {                                                                          \
        if (!(c)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
            exit(1);                                                              \
        }                                                                         \
    } while (0)
#define CHECK_RC(x) CHECK((x) == SC_OK)

#endif
