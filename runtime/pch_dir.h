/*
 * The directory a process gives NVRTC for its automatic PCH files (a large
 * file per include closure): $TMPDIR/megajit-pch.XXXXXX, private to the
 * process because a PCH embeds heap addresses that another process's NVRTC
 * rejects.
 *
 * Nothing is left behind: the process removes its directory at exit, and a
 * directory whose process could not (killed, crashed, left through _exit) is
 * removed by the next process that makes one. A live process holds an flock on
 * its directory, so "nobody holds the lock" means "its owner is gone". A forked
 * child makes its own directory when it compiles.
 */
#ifndef MJ_PCH_DIR_H
#define MJ_PCH_DIR_H

/* This process's PCH directory, made at the first call; NULL (warned once)
 * when none can be made, and compiles then go without PCH. */
const char *mj_pch_dir(void);

/* The name of such a directory: MJ_PCH_DIR_PREFIX and six characters. */
#define MJ_PCH_DIR_PREFIX "megajit-pch."

#endif
