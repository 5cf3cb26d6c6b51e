"""What the console tests share: one command through a run's console socket
(<run dir>/repl.sock), as `tandem attach` sends it; returns the reply."""
import socket


def socket_command(path, line, timeout=30):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)

    def read():
        # Each reply ends with a NUL byte.
        buf = b""
        while not buf.endswith(b"\0"):
            d = s.recv(65536)
            if not d:
                break
            buf += d
        return buf.rstrip(b"\0").decode()

    read()  # greeting
    s.sendall((line + "\n").encode())
    out = read()
    s.close()
    return out
