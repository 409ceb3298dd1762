#include "tk/core.h"

void tk_normalize(char *word) {
    for (; *word; word++)
        if (*word >= 'A' && *word <= 'Z') *word = (char)(*word - 'A' + 'a');
}
