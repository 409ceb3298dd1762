#include "csum.h"

const char *csum_version(void) { return CSUM_VERSION; }
