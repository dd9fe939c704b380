;;; garuda.el --- Chat with the Garuda context engine  -*- lexical-binding: t; -*-

;; Version: 0.1.0
;; Package-Requires: ((emacs "28.1") (jsonrpc "1.0.14"))
;; Keywords: tools, ai
;; URL: https://example.invalid/garuda

;;; Commentary:

;; A thin client for `garuda serve' over the built-in `jsonrpc.el'.
;; M-x garuda opens a chat buffer for the current project; type after the
;; prompt and press RET.  The answer streams in as the model writes it.
;; Tool calls that need approval are asked with `garuda-approve-function'.
;; Other commands: `garuda-compact', `garuda-context', `garuda-sessions',
;; `garuda-cancel', `garuda-shutdown'.

;;; Code:

(require 'cl-lib)
(require 'jsonrpc)
(require 'json)
(require 'project)

(defgroup garuda nil
  "Chat with the Garuda context engine."
  :group 'tools
  :prefix "garuda-")

(defcustom garuda-program "garuda"
  "Path of the garuda binary."
  :type 'string)

(defcustom garuda-program-args '("serve")
  "Arguments given to `garuda-program'."
  :type '(repeat string))

(defcustom garuda-model nil
  "Model spec for new sessions, e.g. \"anthropic/claude-sonnet-4-5\".
nil uses the model configured in Garuda's config.toml."
  :type '(choice (const :tag "Configured default" nil) string))

(defcustom garuda-policy "ask"
  "Approval policy for new sessions."
  :type '(choice (const "ask") (const "auto-edit") (const "full-auto")))

(defcustom garuda-approve-function #'garuda-approve-with-completing-read
  "Function that answers a `permission/request'.
It is called with the request params (a plist with :title, :toolName,
:input and :options) and returns the chosen optionId string."
  :type '(choice (function-item garuda-approve-with-completing-read)
                 (function-item garuda-approve-with-y-or-n-p)
                 function))

(defcustom garuda-request-timeout 30
  "Seconds to wait for a reply to a short request."
  :type 'integer)

(defvar garuda-event-functions nil
  "Abnormal hook run with (SESSION-ID EVENT) for every `turn/update'.")

(defvar garuda-turn-finished-functions nil
  "Abnormal hook run with (SESSION-ID RESULT-OR-ERROR) when a turn ends.")

(defvar garuda--connection nil "The running `jsonrpc-process-connection'.")
(defvar garuda--workspaces nil "Alist of workspace root to workspaceId.")
(defvar garuda--buffers (make-hash-table :test #'equal) "Session id to chat buffer.")

(defvar-local garuda--session-id nil "The chat buffer's session.")
(defvar-local garuda--workspace-id nil "The chat buffer's workspace.")
(defvar-local garuda--input-marker nil "Start of the input area.")
(defvar-local garuda--output-marker nil "Where streamed text goes.")
(defvar-local garuda--running nil "Non-nil while a turn runs.")
(defvar-local garuda--last-result nil "Result plist (or error) of the last turn.")
(defvar-local garuda--turn-start nil "`float-time' when the last turn was sent.")
(defvar-local garuda--first-delta nil "`float-time' of the last turn's first text.")

;;;; Connection

(defun garuda--live-p ()
  "Non-nil when the server runs."
  (and garuda--connection (jsonrpc-running-p garuda--connection)))

(defun garuda--connect ()
  "Start `garuda serve' and initialize it; return the connection."
  (unless (garuda--live-p)
    (setq garuda--workspaces nil)
    (let ((conn (make-instance
                 'jsonrpc-process-connection
                 :name "garuda"
                 :process (lambda ()
                            (make-process
                             :name "garuda"
                             :command (cons garuda-program garuda-program-args)
                             :connection-type 'pipe
                             :coding 'utf-8-emacs-unix
                             :noquery t
                             :stderr (get-buffer-create "*garuda stderr*")))
                 :notification-dispatcher #'garuda--notification
                 :request-dispatcher #'garuda--request
                 :on-shutdown (lambda (_) (setq garuda--workspaces nil)))))
      (jsonrpc-request conn 'initialize
                       (list :processId (emacs-pid)
                             :capabilities (make-hash-table))
                       :timeout garuda-request-timeout)
      (jsonrpc-notify conn 'initialized (make-hash-table))
      (setq garuda--connection conn)))
  garuda--connection)

(defun garuda--call (method params)
  "Send METHOD (a string) with PARAMS and wait for the result."
  (let ((conn (garuda--connect)))
    (prog1 (jsonrpc-request conn (intern method) params :timeout garuda-request-timeout)
      (garuda--drain conn))))

(defun garuda--drain (conn)
  "Handle messages CONN has already received but not dispatched.
`jsonrpc-request' returns by throwing out of the process filter, which leaves
the rest of that read (e.g. a `turn/run' answer right behind a `turn/cancel'
answer) unparsed until more output comes; run the filter again to parse it."
  (let ((proc (jsonrpc--process conn)))
    (when (and (process-live-p proc) (buffer-live-p (process-buffer proc)))
      (jsonrpc--process-filter proc ""))))

(defun garuda--workspace (root)
  "Open ROOT as a workspace (once) and return its id."
  (or (cdr (assoc root garuda--workspaces))
      (let ((id (plist-get (garuda--call "workspace/open" (list :root root))
                           :workspaceId)))
        (push (cons root id) garuda--workspaces)
        id)))

(defun garuda-shutdown ()
  "Shut the server down cleanly (`shutdown', `exit'), killing it if it lingers."
  (interactive)
  (when garuda--connection
    (let ((conn garuda--connection)
          (proc (jsonrpc--process garuda--connection)))
      (setq garuda--connection nil)
      (when (process-live-p proc)
        (ignore-errors
          (jsonrpc-request conn 'shutdown nil :timeout 5)
          (jsonrpc-notify conn 'exit nil))
        (with-timeout (5 nil)
          (while (process-live-p proc) (accept-process-output proc 0.05))))
      (jsonrpc-shutdown conn t)
      (clrhash garuda--buffers))))

;;;; Server to client

(defun garuda--notification (_conn method params)
  "Handle notification METHOD with PARAMS."
  (when (eq method 'turn/update)
    (let* ((sid (plist-get params :sessionId))
           (event (plist-get params :event))
           (buf (gethash sid garuda--buffers)))
      (when (buffer-live-p buf)
        (with-current-buffer buf (garuda--show-event event)))
      (run-hook-with-args 'garuda-event-functions sid event))))

(defun garuda--request (_conn method params)
  "Answer request METHOD with PARAMS."
  (pcase method
    ('permission/request
     (list :optionId (or (funcall garuda-approve-function params) "reject")))
    ('tool/call
     (list :content (format "this client runs no tool %s" (plist-get params :name))
           :isError t))
    (_ (jsonrpc-error :code -32601 :message (format "unknown method %s" method)))))

(defun garuda-approve-with-completing-read (params)
  "Ask which of the options in PARAMS to take; return its optionId."
  (let* ((opts (mapcar (lambda (o) (cons (plist-get o :name) (plist-get o :optionId)))
                       (plist-get params :options)))
         (pick (completing-read (format "Garuda: %s? " (plist-get params :title))
                                opts nil t nil nil (caar opts))))
    (or (cdr (assoc pick opts)) "reject")))

(defun garuda-approve-with-y-or-n-p (params)
  "Allow once or reject the call in PARAMS with `y-or-n-p'."
  (if (y-or-n-p (format "Garuda: allow %s? " (plist-get params :title)))
      "allow_once"
    "reject"))

;;;; Chat buffer

(defvar garuda-chat-mode-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "RET") #'garuda-send-input)
    (define-key map (kbd "C-c C-c") #'garuda-cancel)
    (define-key map (kbd "C-c C-k") #'garuda-compact)
    (define-key map (kbd "C-c C-i") #'garuda-context)
    (define-key map (kbd "C-c C-s") #'garuda-sessions)
    map)
  "Keymap of `garuda-chat-mode'.")

(define-derived-mode garuda-chat-mode text-mode "Garuda"
  "Chat with Garuda.  Type after the prompt and press RET."
  ;; Output is always inserted where the input area starts, so one marker serves both.
  (setq-local garuda--input-marker (copy-marker (point-max)))
  (setq-local garuda--output-marker garuda--input-marker))

(defun garuda--insert (text &optional face)
  "Insert TEXT (with FACE) in the transcript, before the input area."
  (let ((inhibit-read-only t)
        (follow (= (point) garuda--output-marker)))
    (save-excursion
      (goto-char garuda--output-marker)
      (insert (if face (propertize text 'face face) text))
      (set-marker garuda--output-marker (point))
      (add-text-properties (point-min) (point) '(read-only t front-sticky t rear-nonsticky t)))
    (when follow (goto-char garuda--output-marker))))

(defun garuda--show-event (event)
  "Show turn EVENT in the current chat buffer."
  (pcase (plist-get event :kind)
    ("textDelta"
     (unless garuda--first-delta (setq garuda--first-delta (float-time)))
     (garuda--insert (plist-get event :text)))
    ("toolCallStarted"
     (garuda--insert (format "\n[tool %s %s]\n" (plist-get event :name)
                             (json-encode (plist-get event :input)))
                     'font-lock-comment-face))
    ("compaction" (garuda--insert "\n[compacted]\n" 'font-lock-comment-face))))

(defun garuda--chat-buffer (root)
  "Return the chat buffer for ROOT, creating it and its session."
  (let ((buf (get-buffer-create
              (format "*garuda: %s*" (file-name-nondirectory (directory-file-name root))))))
    (with-current-buffer buf
      (unless (derived-mode-p 'garuda-chat-mode)
        (garuda-chat-mode)
        (setq default-directory (file-name-as-directory root)))
      (unless (and garuda--session-id (garuda--live-p))
        (setq garuda--workspace-id (garuda--workspace root))
        (let ((res (garuda--call "session/new"
                                 (list :workspaceId garuda--workspace-id
                                       :model garuda-model
                                       :policy garuda-policy))))
          (setq garuda--session-id (plist-get res :sessionId))
          (garuda--insert (format "Garuda session %s (%s)\n\n> "
                                  garuda--session-id (plist-get res :model))
                          'font-lock-comment-face)))
      (puthash garuda--session-id buf garuda--buffers))
    buf))

(defun garuda--root ()
  "The project root of the current buffer, else `default-directory'."
  (directory-file-name
   (expand-file-name
    (let ((pr (project-current)))
      (if pr (project-root pr)
        default-directory)))))

;;;###autoload
(defun garuda (&optional root)
  "Open the Garuda chat buffer for ROOT (default: the current project)."
  (interactive)
  (let ((buf (garuda--chat-buffer (directory-file-name (expand-file-name (or root (garuda--root)))))))
    (pop-to-buffer buf)
    (goto-char (point-max))
    buf))

(defun garuda-send-input ()
  "Send the text in the input area as a prompt."
  (interactive)
  (let ((text (string-trim (buffer-substring-no-properties garuda--input-marker (point-max)))))
    (unless (string-empty-p text)
      (let ((inhibit-read-only t)) (delete-region garuda--input-marker (point-max)))
      (garuda-send text))))

(defun garuda-send (prompt)
  "Run a turn with PROMPT in the current chat buffer; return at once."
  (interactive "sAsk Garuda: ")
  (when garuda--running (user-error "A turn is running; `garuda-cancel' it first"))
  (let ((buf (current-buffer)) (sid garuda--session-id))
    (garuda--insert (concat prompt "\n"))
    (setq garuda--running t garuda--last-result nil
          garuda--turn-start (float-time) garuda--first-delta nil)
    (jsonrpc-async-request
     (garuda--connect) 'turn/run
     (list :sessionId sid :input (vector (list :type "text" :text prompt)))
     :timeout nil
     :success-fn (lambda (res) (garuda--turn-done buf sid res (plist-get res :stopReason)))
     :error-fn (lambda (err) (garuda--turn-done buf sid (list :error err)
                                                (format "error: %s" (plist-get err :message)))))))

(defun garuda--turn-done (buf sid result label)
  "Record RESULT of SID's turn in BUF and show LABEL."
  (when (buffer-live-p buf)
    (with-current-buffer buf
      (setq garuda--running nil garuda--last-result result)
      (garuda--insert (format "\n[%s]\n\n> " label) 'font-lock-comment-face)))
  (run-hook-with-args 'garuda-turn-finished-functions sid result))

(defun garuda--session ()
  "The session of the current chat buffer (or the project's)."
  (or garuda--session-id
      (with-current-buffer (garuda--chat-buffer (garuda--root)) garuda--session-id)))

(defun garuda-cancel ()
  "Cancel the running turn."
  (interactive)
  (garuda--call "turn/cancel" (list :sessionId (garuda--session))))

(defun garuda-compact (&optional focus)
  "Compact the session's history, keeping FOCUS in the summary."
  (interactive (list (let ((f (read-string "Compaction focus (optional): ")))
                       (unless (string-empty-p f) f))))
  (let ((res (garuda--call "session/compact"
                           (append (list :sessionId (garuda--session))
                                   (and focus (list :focus focus))))))
    (message "Garuda: %s" (or (plist-get res :message) "compacted"))
    res))

(defun garuda-context ()
  "Show the session's token accounting (`context/inspect') in a buffer."
  (interactive)
  (let ((res (garuda--call "context/inspect" (list :sessionId (garuda--session)))))
    (with-current-buffer (get-buffer-create "*garuda context*")
      (let ((inhibit-read-only t))
        (erase-buffer)
        (insert (json-serialize res :null-object nil :false-object :json-false))
        (json-pretty-print-buffer)
        (js-mode)
        (view-mode 1))
      (display-buffer (current-buffer))
      res)))

(defun garuda-sessions ()
  "Pick a stored session of this workspace and resume it in the chat buffer."
  (interactive)
  (let* ((buf (if (derived-mode-p 'garuda-chat-mode) (current-buffer)
                (garuda--chat-buffer (garuda--root))))
         (ws (buffer-local-value 'garuda--workspace-id buf))
         (sessions (plist-get (garuda--call "session/list" (list :workspaceId ws)) :sessions))
         (choices (mapcar (lambda (s)
                            (cons (format "%s  (%d messages, %s)"
                                          (or (plist-get s :title) (plist-get s :sessionId))
                                          (plist-get s :messageCount) (plist-get s :sessionId))
                                  (plist-get s :sessionId)))
                          sessions))
         (sid (cdr (assoc (completing-read "Resume Garuda session: " choices nil t) choices))))
    (garuda--call "session/load" (list :sessionId sid))
    (with-current-buffer buf
      (setq garuda--session-id sid)
      (puthash sid buf garuda--buffers)
      (garuda--insert (format "\n[resumed %s]\n" sid) 'font-lock-comment-face)
      (seq-doseq (m (plist-get (garuda--call "session/messages" (list :sessionId sid)) :messages))
        (seq-doseq (b (plist-get m :content))
          (when (equal (plist-get b :type) "text")
            (garuda--insert (format "%s: %s\n" (plist-get m :role) (plist-get b :text))))))
      (garuda--insert "\n> "))
    sid))

(provide 'garuda)
;;; garuda.el ends here
