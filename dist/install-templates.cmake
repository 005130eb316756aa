# Runs at install time (from dist/CMakeLists.txt's install(CODE)): fills the
# prefix in effect, `cmake --install --prefix P` included, into the staged
# templates and installs them. Each install fills its own scratch copies, so
# installs of one build to different prefixes may run at once.
# In: VC_STAGE, VC_SYSCONF_REL, VC_TEMPLATES (NAME=DESTINATION;...).
set(VC_PREFIX "${CMAKE_INSTALL_PREFIX}")
# GNUInstallDirs' rule: /etc for the prefix /usr, else PREFIX/etc.
if(IS_ABSOLUTE "${VC_SYSCONF_REL}")
  set(VC_SYSCONFDIR "${VC_SYSCONF_REL}")
elseif(VC_PREFIX STREQUAL "/usr")
  set(VC_SYSCONFDIR "/${VC_SYSCONF_REL}")
else()
  set(VC_SYSCONFDIR "${VC_PREFIX}/${VC_SYSCONF_REL}")
endif()
string(RANDOM LENGTH 16 tag)
set(tmp "${VC_STAGE}/install-${tag}")
foreach(entry ${VC_TEMPLATES})
  string(REPLACE "=" ";" entry "${entry}")
  list(GET entry 0 name)
  list(GET entry 1 dest)
  if(NOT IS_ABSOLUTE "${dest}")
    set(dest "${CMAKE_INSTALL_PREFIX}/${dest}")
  endif()
  get_filename_component(base "${name}" NAME)
  configure_file("${VC_STAGE}/${name}.in" "${tmp}/${base}" @ONLY)
  file(INSTALL DESTINATION "${dest}" TYPE FILE FILES "${tmp}/${base}")
endforeach()
file(REMOVE_RECURSE "${tmp}")
