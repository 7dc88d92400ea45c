/* One scratch directory per CPU test program (a cache, snapshots): cmocka's
 * group setup makes it under /tmp, the group teardown removes it. */
#ifndef MJ_TESTS_SCRATCH_DIR_H
#define MJ_TESTS_SCRATCH_DIR_H

#include <stdio.h>
#include <stdlib.h>

static char scratch_dir[64];

static int scratch_dir_create(void **state) {
    (void)state;
    snprintf(scratch_dir, sizeof scratch_dir, "/tmp/mj-test-XXXXXX");
    return mkdtemp(scratch_dir) ? 0 : -1;
}

static int scratch_dir_remove(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch_dir);
    return system(cmd);
}

#endif
