/* Preloaded into every process of a gVisor (runsc) sandbox: see terminal_env/sandbox/runtimes.py.

   The runsc that Debian 12 ships (0.0~20221219) answers statx() and fstatat() with EINVAL whenever
   the flag AT_NO_AUTOMOUNT is set, and coreutils always sets it: `ls DIR`, `ls -l`, `stat FILE`
   all fail with "Invalid argument". The flag only matters on automount points, which a sandbox
   has none of, so these wrappers drop it and make the system call themselves.

   No C library is linked in (the sandbox's image may have any, or none): the system calls are
   made directly, and errno is set through the __errno_location of the program's own libc. */

#define AT_NO_AUTOMOUNT 0x800
#define SYS_newfstatat 262
#define SYS_statx 332

struct stat;
struct statx;
extern int *__errno_location(void);

static long syscall5(long n, long a, long b, long c, long d, long e) {
    long ret;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "0"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
                     : "rcx", "r11", "memory");
    return ret;
}

static int result(long ret) {
    if (ret < 0 && ret > -4096) {
        *__errno_location() = (int)-ret;
        return -1;
    }
    return (int)ret;
}

int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *buf) {
    return result(syscall5(SYS_statx, dirfd, (long)path, flags & ~AT_NO_AUTOMOUNT, mask, (long)buf));
}

int fstatat(int dirfd, const char *path, struct stat *buf, int flags) {
    return result(syscall5(SYS_newfstatat, dirfd, (long)path, (long)buf, flags & ~AT_NO_AUTOMOUNT, 0));
}

int fstatat64(int dirfd, const char *path, struct stat *buf, int flags)
    __attribute__((alias("fstatat")));
