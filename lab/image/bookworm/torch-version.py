from typing import Optional

__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'xpu']
__version__ = '2.14.1+cu130'
debug = False
cuda: Optional[str] = '13.0'
hip: Optional[str] = None
xpu: Optional[str] = None
