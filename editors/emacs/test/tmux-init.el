;;; tmux-init.el --- Set-up of the real `emacs -nw' that tmux-approval.sh types into  -*- lexical-binding: t; -*-

;; Loaded with `emacs -nw -Q -L editors/emacs -l tmux-init.el FILE'.  The environment gives
;; the binary (GARUDA_BIN) and the model (GARUDA_TEST_MODEL); HOME and the XDG dirs are set
;; by the script.  Nothing here answers approvals: the keys typed by tmux do.

;;; Code:

(require 'garuda)

(setq garuda-program (getenv "GARUDA_BIN")
      garuda-model (getenv "GARUDA_TEST_MODEL")
      garuda-policy "ask"
      inhibit-startup-screen t
      make-backup-files nil
      auto-save-default nil
      create-lockfiles nil)

;;; tmux-init.el ends here
